"""One module per framework the SDK governs or observes (as sentry-sdk's ``integrations/``).

langchain, langgraph, openai_agents, pydantic_ai, tenacity and otel; ``providers/`` holds
the provider clients' own HTTP road. Each imports its framework lazily; an integration
may import every other room of the SDK, and no other room imports an integration
(``tests/foundation/test_sdk_rooms.py`` lists the written exceptions).
"""
