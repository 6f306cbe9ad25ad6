"""Reading text without a model: entity names, dates and times. Pure functions shared by writes and recall."""
