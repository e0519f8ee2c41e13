"""Reporting: the terminal tables, Markdown and PNG plots. Imports core and store."""
