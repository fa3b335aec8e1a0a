"""Train agent programs through an OpenAI-compatible endpoint."""
