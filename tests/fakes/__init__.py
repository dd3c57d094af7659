"""Fake HTTP servers on 127.0.0.1 for the providers' real client libraries (google-genai, openai)."""
