"""ag2net: an independent implementation of the AG2 agent network (the seed's public names)."""

import typing as _typing

from ag2net.adapters import (
    CONSULTING_TYPE,
    CONVERSATION_TYPE,
    DISCUSSION_TYPE,
    ORDERING_ROUND_ROBIN,
    WORKFLOW_TYPE,
    AdapterResult,
    AdapterState,
    AgentTarget,
    Always,
    BaseAdapter,
    ChannelAdapter,
    ConsultingAdapter,
    ConsultingState,
    ContextEquals,
    ConversationAdapter,
    ConversationState,
    DiscussionAdapter,
    DiscussionState,
    Finish,
    FromSpeaker,
    Handoff,
    Rendered,
    RevertToInitiatorTarget,
    RoundRobinTarget,
    StayTarget,
    TerminateTarget,
    ToolCalled,
    Transition,
    TransitionGraph,
    TransitionRegistry,
    WorkflowAdapter,
    WorkflowState,
    default_adapters,
    default_build_packet_envelope,
    default_build_round_envelope,
    default_build_text_envelope,
    default_expected_next,
    default_extract_turn_input,
    default_render_envelope,
    default_tools_for,
    ensure_parts,
    make_say_tool,
)
from ag2net.adapters.transitions import (
    TransitionCondition,
    TransitionDecision,
    TransitionTarget,
    register_condition,
    register_target,
)
from ag2net.agent import (
    Agent,
    AgentReply,
    Model,
    ModelCall,
    ModelError,
    ModelResponse,
    OpenAIChatModel,
    ScriptedModel,
    ScriptExhausted,
    Task,
    TaskSink,
    TokenCounter,
    ToolLoopError,
    current_task,
    estimate_events,
    estimate_tokens,
    estimate_tools,
    tool_call,
)
from ag2net.agent.hooks import BaseMiddleware, HumanInputRequest, TurnContext, TurnContextInject
from ag2net.agent.tool import (
    AGENT_CLIENT_DEP,
    CHANNEL_DEP,
    CHANNEL_STATE_DEP,
    HUB_DEP,
    TASK_DEP,
    AgentClientInject,
    ChannelInject,
    ChannelStateInject,
    HubInject,
    Inject,
    TaskInject,
    Tool,
    tool,
)
from ag2net.channel import (
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    Expectation,
    ExpectedTurn,
    Participant,
    ParticipantRole,
    ParticipantSchema,
)
from ag2net.client import (
    AgentClient,
    Channel,
    HubClient,
    HumanClient,
    NetworkPlugin,
    TurnPreview,
    TurnRecord,
    default_handler,
    read_wal_until,
    resolve_view_policy,
    run_turn,
    stamp_dependencies,
)
from ag2net.client.checkpoint import HubBackedCheckpointStore, TaskMirror
from ag2net.client.plugin import NetworkContextPolicy
from ag2net.client.runtime import ClientTask, NetworkClient
from ag2net.client.tools import make_plugin_tools
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_CONTEXT_SET,
    EV_EXPECTATION_VIOLATED,
    EV_PACKET,
    EV_TASK_CANCEL_REQUEST,
    EV_TASK_CANCELLED,
    EV_TEXT,
    Envelope,
    Priority,
    visible_to,
)
from ag2net.errors import (
    AccessDeniedError,
    AuthError,
    InboxFull,
    NetworkError,
    NotFoundError,
    ProtocolError,
    StandbyError,
    WorkflowGraphError,
)
from ag2net.events import (
    BaseEvent,
    CompactionSummary,
    DataInput,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
)
from ag2net.identity import (
    PASSPORT_KINDS,
    AccessBlock,
    AgentRuntime,
    AuthBlock,
    ChannelTypeAccess,
    CostProfile,
    InboxBlock,
    LimitsBlock,
    ObservedStat,
    Passport,
    PassportKind,
    RateBlock,
    Resume,
    ResumeExample,
    Rule,
    check_agent_name,
    parse_duration,
)
from ag2net.ids import make_id, parse_hub_urn
from ag2net.skills import ParsedSkill, parse_skill_frontmatter, render_fallback_skill, skill_summary
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState, task_summary
from ag2net.transport import (
    ErrorFrame,
    Frame,
    HelloFrame,
    LinkClient,
    LinkEndpoint,
    LinkFactory,
    NotifyFrame,
    PingFrame,
    PongFrame,
    ReceiptFrame,
    RequestFrame,
    ResponseFrame,
    WelcomeFrame,
    decode_frame,
    encode_frame,
)
from ag2net.version import __version__
from ag2net.views import (
    EnvelopeRenderer,
    FullTranscript,
    NamedTranscript,
    NamedWindowedSummary,
    NameResolver,
    ViewPolicy,
    WalLog,
    WalSlice,
    WindowedSummary,
    default_name_resolver,
    get_view,
    register_view,
    registered_views,
    view_from_spec,
    view_spec,
)

if _typing.TYPE_CHECKING:  # what the lazy names below are, for type checkers and editors
    from ag2net.hub import (
        ApiKeyAuth,
        AuthRegistry,
        Hub,
        NoAuth,
    )
    from ag2net.hub.arbiter import (
        Allow,
        BaseHubArbiter,
        Decision,
        Deny,
        HubArbiter,
        RuleBasedArbiter,
    )
    from ag2net.hub.audit import (
        AUDIT_KIND_AGENT_REGISTERED,
        AUDIT_KIND_AGENT_UNREGISTERED,
        AUDIT_KIND_CHANNEL_CLOSED,
        AUDIT_KIND_CHANNEL_CREATED,
        AUDIT_KIND_CHANNEL_EXPIRED,
        AUDIT_KIND_EXPECTATION_VIOLATED,
        AUDIT_KIND_RESUME_SET,
        AUDIT_KIND_RULE_SET,
        AUDIT_KIND_SKILL_SET,
        AUDIT_KIND_TASK_TERMINATED,
        AUDIT_KIND_TURN_FAILED,
        RESUME_SOURCE_OBSERVED,
        RESUME_SOURCE_TENANT,
        AuditLog,
        AuditSubscriber,
    )
    from ag2net.hub.auth import (
        AuthAdapter,
    )
    from ag2net.hub.expectations import (
        AcksWithinEvaluator,
        ExpectationContext,
        ExpectationEvaluator,
        MaxSilenceEvaluator,
        ReplyWithinEvaluator,
        Violation,
        ViolationHandler,
        default_evaluators,
    )
    from ag2net.hub.listeners import (
        BaseHubListener,
        HubListener,
    )
    from ag2net.hub.local import (
        LocalLink,
        LocalLinkClient,
        LocalLinkEndpoint,
    )
    from ag2net.hub.records import (
        AuditHandler,
        AutoCloseHandler,
        NotifyChannelHandler,
        default_handlers,
    )
    from ag2net.hub.remote import (
        RemoteAgentProxy,
    )
    from ag2net.protocol import (
        ObservedEvent,
        PendingTurn,
    )
    from ag2net.server import (
        serve_cli,
        serve_ws,
    )
    from ag2net.store import (
        MemoryStore,
        SqliteStore,
        Store,
        StoreError,
        open_store,
    )
    from ag2net.transport.ws import (
        ConnectionLostError,
        WsLink,
        WsLinkClient,
        WsLinkEndpoint,
    )

# Names whose modules load the hub, the store (aiosqlite) or the servers are imported on first use, so
# ``import ag2net.client`` (which runs this file) stays light: a remote agent loads no hub.
_LAZY: dict[str, str] = {
    "ApiKeyAuth": "ag2net.hub",
    "AuthRegistry": "ag2net.hub",
    "Hub": "ag2net.hub",
    "NoAuth": "ag2net.hub",
    "ObservedEvent": "ag2net.protocol",
    "PendingTurn": "ag2net.protocol",
    "Allow": "ag2net.hub.arbiter",
    "BaseHubArbiter": "ag2net.hub.arbiter",
    "Decision": "ag2net.hub.arbiter",
    "Deny": "ag2net.hub.arbiter",
    "HubArbiter": "ag2net.hub.arbiter",
    "RuleBasedArbiter": "ag2net.hub.arbiter",
    "AUDIT_KIND_AGENT_REGISTERED": "ag2net.hub.audit",
    "AUDIT_KIND_AGENT_UNREGISTERED": "ag2net.hub.audit",
    "AUDIT_KIND_CHANNEL_CLOSED": "ag2net.hub.audit",
    "AUDIT_KIND_CHANNEL_CREATED": "ag2net.hub.audit",
    "AUDIT_KIND_CHANNEL_EXPIRED": "ag2net.hub.audit",
    "AUDIT_KIND_EXPECTATION_VIOLATED": "ag2net.hub.audit",
    "AUDIT_KIND_RESUME_SET": "ag2net.hub.audit",
    "AUDIT_KIND_RULE_SET": "ag2net.hub.audit",
    "AUDIT_KIND_SKILL_SET": "ag2net.hub.audit",
    "AUDIT_KIND_TASK_TERMINATED": "ag2net.hub.audit",
    "AUDIT_KIND_TURN_FAILED": "ag2net.hub.audit",
    "RESUME_SOURCE_OBSERVED": "ag2net.hub.audit",
    "RESUME_SOURCE_TENANT": "ag2net.hub.audit",
    "AuditLog": "ag2net.hub.audit",
    "AuditSubscriber": "ag2net.hub.audit",
    "AuthAdapter": "ag2net.hub.auth",
    "AcksWithinEvaluator": "ag2net.hub.expectations",
    "ExpectationContext": "ag2net.hub.expectations",
    "ExpectationEvaluator": "ag2net.hub.expectations",
    "MaxSilenceEvaluator": "ag2net.hub.expectations",
    "ReplyWithinEvaluator": "ag2net.hub.expectations",
    "Violation": "ag2net.hub.expectations",
    "ViolationHandler": "ag2net.hub.expectations",
    "default_evaluators": "ag2net.hub.expectations",
    "BaseHubListener": "ag2net.hub.listeners",
    "HubListener": "ag2net.hub.listeners",
    "LocalLink": "ag2net.hub.local",
    "LocalLinkClient": "ag2net.hub.local",
    "LocalLinkEndpoint": "ag2net.hub.local",
    "AuditHandler": "ag2net.hub.records",
    "AutoCloseHandler": "ag2net.hub.records",
    "NotifyChannelHandler": "ag2net.hub.records",
    "default_handlers": "ag2net.hub.records",
    "RemoteAgentProxy": "ag2net.hub.remote",
    "serve_cli": "ag2net.server",
    "serve_ws": "ag2net.server",
    "MemoryStore": "ag2net.store",
    "SqliteStore": "ag2net.store",
    "Store": "ag2net.store",
    "StoreError": "ag2net.store",
    "open_store": "ag2net.store",
    "ConnectionLostError": "ag2net.transport.ws",
    "WsLink": "ag2net.transport.ws",
    "WsLinkClient": "ag2net.transport.ws",
    "WsLinkEndpoint": "ag2net.transport.ws",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ag2net' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = sorted({name for name in dir() if not name.startswith("_")} | set(_LAZY))
