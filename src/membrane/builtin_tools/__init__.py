"""builtin_tools"""
