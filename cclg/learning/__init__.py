"""Session learning: what cclg learns from the sessions it serves.

Imports point down this list:

- ``usage``: which delivered memories a session used (the usage log the prior reads);
- ``sensors``: what a session's tool calls show (burn, clock, pain, reach, loop), the escalation;
- ``turns``: the previous turn's entry (CogLog's fact and interpretation layers);
- ``rules``: rules learned from failures that were fixed, and their evidence;
- ``distill``: corrections and decisions found in a session's prompts, proposed as memories.
"""
