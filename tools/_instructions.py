"""The server instructions: what the calling model reads once, at connection time, about using memory well."""

INSTRUCTIONS = """\
Mnemograph is your long-term memory. It persists across conversations and is shared with the user's other \
agents and clients.

What to store (memory_write): durable things you would want to know next time - facts about people, \
organizations and projects; the user's preferences and decisions; events with their dates; conclusions of \
long work. Write one self-contained statement per call, with names instead of pronouns ("Ana Lima moved to \
Lisbon in March 2024", not "she moved"). Choose the kind: fact, event, preference, note, message or summary. \
Pass the entities (people, organizations, places, projects) and relations (e.g. Ana Lima -works_at-> Acme) you \
already know: that makes the memory findable by name. For events, pass event_time when you know it. Do not \
store secrets, credentials or small talk.

To keep the record of a conversation as it was said (chat logs, transcripts, this session's turns), call \
conversation_write with a conversation id and the messages (role, content, time): send them all at once or \
one per call with the same id. They are stored verbatim and recallable at once; Mnemograph builds a digest \
of each conversation in the background, and recall uses it to find the conversation's best messages. Use \
memory_write for what you have distilled yourself.

When something changes or was wrong, call amend with the old memory's id: the new version replaces it and the \
old one is kept as history. Do not write a second memory that contradicts the first. When something simply \
stops being true, call retire. When the change happened earlier than now, pass effective_at to amend or \
retire. Writing the same content twice is harmless (it reports "duplicate"). Pass \
on_near_duplicate="fold" when you only restate what may be remembered: if a memory of the same scope already \
says it in other words, nothing new is stored ("report" only lists such near_duplicates in the receipt). When a write receipt lists \
proposals (a name that may be an entity already known, "Jon Smith" beside "John Smith"), nothing was merged: \
ask the user if unsure, then accept or reject it with the entities tool.

Before answering anything that may depend on earlier conversations, call recall with a short query of the \
names and words that matter. Recall returns current facts only; pass include_history=true to see superseded \
and retired versions, or as_of to ask what was true at a past time (questions about change, like "where did I \
work before", include the older versions by themselves). When the user speaks of relative times ("last \
Tuesday", "in May"), pass the conversation's current date as now, with the user's UTC offset. Each result \
is compact: content (long content is cut; memory_read the id for all of it), id, kind, when, status (only \
when not current), scopes (unless only the one searched), conflicts_with (ids of current memories that \
contradict it: weigh both, and ask the user or amend the wrong one) and a one-line reason naming the search lanes \
(bm25 = exact words, vector = meaning, graph = entities), the entity path or the earlier version that led \
to it. Weak matches are left out; pass explain=true for scores and full detail, and group_by with your \
per-conversation metadata key to rank whole conversations.

Scopes (user:<name>, project:<name>, agent:<name>, team:<name>, ...) say whose memory it is. Omit scopes to \
use the session's default scope (list_scopes shows it); a scope also reads the scopes it sits inside. purge \
erases a whole scope irreversibly: only call it when the user explicitly asks. memory_read shows one memory's \
full record and version chain.

When a call fails, the error says what to do next (for example, call recall to find a memory's id).
"""
