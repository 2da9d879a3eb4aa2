"""Agent definitions: the tolerant frontmatter parser, the catalog and the writer."""
