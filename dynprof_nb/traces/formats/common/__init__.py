"""What several formats' readers share: read budgets, SQLite access, timestamps."""
