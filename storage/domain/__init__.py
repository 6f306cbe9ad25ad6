"""The domain: records, errors and validation rules. Pure: no I/O, no store library, no thread."""
