"""Test helpers shared by the audit tests: a mock OpenAI server and audit-item generators."""
