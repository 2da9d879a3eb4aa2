"""resolve"""
