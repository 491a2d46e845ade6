"""Multi-turn agent episodes: an environment protocol, tool-call formats, the episode loop, a
sandboxed workspace with tests the agent cannot touch, and a small trainer for episodes."""
