"""A plugin module that forgot RULES."""
RULE = []
