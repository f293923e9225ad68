"""The OpenAI API's request and response shapes that the gateway speaks, and nothing else.

Requests are validated here (what a client may send); responses are built here (what a client
receives). vLLM's extensions are part of the shape because they are what makes a rollout
possible behind an upstream: ``return_token_ids`` asks for ``prompt_token_ids`` and each
choice's ``token_ids``. Unknown request fields are kept, not refused: a local backend ignores
them, as OpenAI-compatible servers do, and an upstream receives them as the client sent them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    arguments: str = "{}"  # a JSON object, as text (OpenAI's form)


class ToolCallIn(BaseModel):
    """A call of an earlier assistant turn, as the client sends it back."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = ""
    tool_calls: list[ToolCallIn] | None = None  # an assistant turn's calls
    tool_call_id: str | None = None  # a tool message: the call it answers
    name: str | None = None

    def text(self) -> str:
        """The message's text: a list of content parts is joined from its text parts."""
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False  # a last chunk with the usage (and no choices)


class _Sampling(BaseModel):
    """What both endpoints take to sample; ``n`` and ``temperature=0`` are refused because the
    recorded log-probabilities are those of one draw from the sampling distribution."""

    model_config = ConfigDict(extra="allow")

    model: str = ""
    temperature: float | None = Field(None, gt=0, le=10)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1, le=32768)
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1, le=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    seed: int | None = None  # which draw, not which distribution: passed to engines that take it
    return_token_ids: bool = False  # vLLM's extension: token ids in the answer

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > 16:
            raise ValueError("at most 16 stop strings")
        return value

    def stops(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


class FunctionDef(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON Schema of the arguments object
    strict: bool | None = None


class Tool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function"] = "function"
    function: FunctionDef


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    """``tool_choice`` naming the one function the answer must call."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["function"] = "function"
    function: NamedFunction


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)  # alternatives per token, as OpenAI's
    max_completion_tokens: int | None = Field(None, ge=1, le=32768)
    tools: list[Tool] | None = Field(None, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool = True

    @model_validator(mode="after")
    def _top_needs_logprobs(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    @model_validator(mode="after")
    def _choice_needs_tools(self) -> ChatCompletionRequest:
        choice = self.tool_choice
        if choice not in (None, "none") and not self.tools:
            raise ValueError("tool_choice is only allowed when tools are specified")
        if isinstance(choice, NamedToolChoice) and choice.function.name not in {
            t.function.name for t in self.tools or ()
        }:
            raise ValueError(f"tool_choice names {choice.function.name!r}, which is not a tool")
        return self

    def uses_tools(self) -> bool:
        """Whether the request has tools or a history with calls: then its messages are
        rendered in the tool format (``models.tool_format``), not as they are."""
        return bool(self.tools) or any(m.role == "tool" or m.tool_calls for m in self.messages)

    def prompt_messages(self) -> list[dict[str, Any]]:
        """The messages for the model's chat template: as they are, or with the tools, calls
        and results rendered in the default tool format (``tool_choice: none`` leaves the tools
        out: the model is not offered what it may not call)."""
        if not self.uses_tools():
            return [{"role": m.role, "content": m.text()} for m in self.messages]
        from models.tool_format import render

        offered = None if self.tool_choice == "none" else self.tools
        return render(
            [m.model_dump(exclude_none=True) for m in self.messages],
            [t.model_dump(exclude_none=True) for t in offered or ()],
            self.parallel_tool_calls,
        )

    def template_inputs(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """The messages and tools for a model whose own chat template renders tools
        (``models.tool_template``); ``tool_choice: none`` offers none."""
        from models.tool_template import template_messages, template_tools

        offered = None if self.tool_choice == "none" else self.tools
        messages = [m.model_dump(exclude_none=True) for m in self.messages]
        tools = [t.model_dump(exclude_none=True) for t in offered or ()]
        return template_messages(messages, self.parallel_tool_calls), template_tools(tools)

    def token_budget(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(_Sampling):
    prompt: str | list[int] = Field(min_length=1)  # text, or token ids (passed untouched)
    logprobs: int | None = Field(None, ge=0, le=5)  # alternatives per token (0: the sampled)
    echo: Literal[False] = False

    def token_budget(self) -> int | None:
        return self.max_tokens


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChatLogprobs(BaseModel):
    content: list[TokenLogprob] | None = None
    refusal: list[TokenLogprob] | None = None


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]] | None = None
    text_offset: list[int]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallOut] | None = None


class ChatChoice(BaseModel):
    index: int = 0
    message: AssistantMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: str
    token_ids: list[int] | None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    prompt_token_ids: list[int] | None = None


class ToolCallDelta(BaseModel):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: dict[str, str] | None = None  # name and/or a piece of the arguments


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChatChunkChoice(BaseModel):
    index: int = 0
    delta: ChatDelta
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None
    token_ids: list[int] | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]  # none in the usage chunk
    usage: Usage | None = None  # in the last chunk, with ``stream_options.include_usage``
    prompt_token_ids: list[int] | None = None


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None


class CompletionResponse(BaseModel):
    """Also each chunk of a streamed completion (OpenAI sends the same object)."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "rtrl"
    parent: str | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    code: str | None = None
    param: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class LoadLoraAdapterRequest(BaseModel):
    """vLLM's runtime adapter endpoint: a peft adapter directory served as model ``lora_name``."""

    model_config = ConfigDict(extra="ignore")

    lora_name: str = Field(min_length=1, max_length=128)
    lora_path: str = Field(min_length=1)
