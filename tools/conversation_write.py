"""``conversation_write``: hand over a conversation (all of it, or one message at a time) to be remembered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from storage.domain.models import (
    MAX_CONTENT_CHARS,
    MAX_CONVERSATION_ID_CHARS,
    MAX_MESSAGES,
    MAX_NAME_CHARS,
    MAX_SCOPES_PER_CALL,
    MessageIn,
    WriteStatus,
)
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import IsoTime, ScopeIdStr, WireModel, short_id

if TYPE_CHECKING:
    from storage import Engine


class MessageArg(WireModel):
    role: Literal["user", "assistant", "system", "tool"] = Field(description="Who sent it.")
    content: str = Field(
        min_length=1, max_length=MAX_CONTENT_CHARS, description="The message as it was said, word for word."
    )
    time: IsoTime | None = Field(
        default=None, description="When it was sent (ISO 8601). Omit for now (the time you send it)."
    )
    speaker: str | None = Field(
        default=None,
        max_length=MAX_NAME_CHARS,
        description="The sender's name when you know it, e.g. 'Ana Lima' ('I' in the message means them).",
    )
    id: str | None = Field(
        default=None,
        max_length=MAX_CONVERSATION_ID_CHARS,
        description="Your own id for the message, if you have one. Without it, a message is known by its "
        "role, time and words: send time or id so that the same words said twice stay two messages.",
    )


class ConversationWriteIn(WireModel):
    conversation: str = Field(
        min_length=1,
        max_length=MAX_CONVERSATION_ID_CHARS,
        description="Your id for this conversation (a chat or session id). Use the same id for every call "
        "about the same conversation; messages are grouped and digested by it.",
    )
    messages: list[MessageArg] = Field(
        min_length=1,
        max_length=MAX_MESSAGES,
        description=f"The messages, in any order (their times order them): the whole conversation, the new "
        f"ones, or just one. At most {MAX_MESSAGES} per call; send longer conversations in several calls.",
    )
    scopes: list[ScopeIdStr] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SCOPES_PER_CALL,
        description="Where to store it, e.g. ['user:ana']. Omit to use this session's default scope.",
    )


class MessageReceipt(BaseModel):
    id: str = Field(
        description="The message's memory id (its first 12 hex characters); pass it to memory_read or retire."
    )
    status: Literal["added", "duplicate", "linked"] = Field(
        description="added: stored now; duplicate: this message of this conversation was already stored."
    )


class ConversationWriteOut(BaseModel):
    conversation: str
    messages: list[MessageReceipt] = Field(description="One receipt per message sent, in the same order.")
    added: int = Field(description="How many messages were new.")
    digest: Literal["scheduled", "off"] = Field(
        description="scheduled: Mnemograph (re)builds this conversation's digest in the background once no "
        "message has come for a few seconds; recall uses it to find the conversation's best messages."
    )


async def conversation_write(
    engine: Engine, caller: Caller, args: ConversationWriteIn
) -> ConversationWriteOut:
    """Store the messages (all or none); the digest is built after the call returns."""
    receipt = await blocking(
        engine.write_conversation,
        args.conversation,
        [MessageIn(m.role, m.content, m.time, m.speaker, m.id) for m in args.messages],
        caller.scopes_or_default(args.scopes),
        principal=caller.principal,
        extractor=caller.extractor,
    )
    return ConversationWriteOut(
        conversation=receipt.conversation,
        messages=[MessageReceipt(id=short_id(r.id), status=_status(r.status)) for r in receipt.messages],
        added=sum(r.status == "added" for r in receipt.messages),
        digest=receipt.digest,
    )


def _status(status: WriteStatus) -> Literal["added", "duplicate", "linked"]:
    # Messages are stored verbatim: a conversation never looks for near-duplicates, so nothing is folded.
    if status == "folded":
        raise AssertionError("a conversation's message was folded")
    return status


SPEC = ToolSpec(
    name="conversation_write",
    title="Remember a conversation",
    description=(
        "Hand over a conversation to remember as it was said: a list of messages with roles and times, or "
        "one message at a time with the same conversation id. Every message is stored verbatim (kind "
        "message, its send time as its time) and can be recalled as soon as this returns; Mnemograph then "
        "reads names and dates from it and builds a digest of the whole conversation in the background. Use "
        "it to keep the record of what was said (chat logs, meeting transcripts, the turns of this session). "
        "Use memory_write instead for a self-contained fact, preference, decision or event you have "
        "distilled yourself. Re-sending messages already stored is harmless (status duplicate). One bad "
        "message rejects the whole call and nothing is stored."
    ),
    input_model=ConversationWriteIn,
    output_model=ConversationWriteOut,
    hints=Hints(read_only=False, destructive=False, idempotent=True),
    run=conversation_write,
)
