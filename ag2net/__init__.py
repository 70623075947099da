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
    AGENT_CLIENT_DEP,
    CHANNEL_DEP,
    CHANNEL_STATE_DEP,
    HUB_DEP,
    TASK_DEP,
    Agent,
    AgentClientInject,
    AgentReply,
    ChannelInject,
    ChannelStateInject,
    HubInject,
    Inject,
    Model,
    ModelCall,
    ModelError,
    ModelResponse,
    OpenAIChatModel,
    ScriptedModel,
    ScriptExhausted,
    Task,
    TaskInject,
    TaskSink,
    TokenCounter,
    Tool,
    ToolLoopError,
    current_task,
    estimate_events,
    estimate_tokens,
    estimate_tools,
    tool,
    tool_call,
)
from ag2net.agent.hooks import (
    ApprovalPolicy,
    BaseMiddleware,
    HumanInputRequest,
    ToolApprovalRequest,
    TurnContext,
    TurnContextInject,
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
#: module → the names it gives ``ag2net`` (space-separated), imported on first use
_LAZY_MODULES: dict[str, str] = {
    "ag2net.hub": "ApiKeyAuth AuthRegistry Hub NoAuth",
    "ag2net.protocol": "ObservedEvent PendingTurn",
    "ag2net.hub.arbiter": "Allow BaseHubArbiter Decision Deny HubArbiter RuleBasedArbiter",
    "ag2net.hub.audit": (
        "AUDIT_KIND_AGENT_REGISTERED AUDIT_KIND_AGENT_UNREGISTERED AUDIT_KIND_CHANNEL_CLOSED "
        "AUDIT_KIND_CHANNEL_CREATED AUDIT_KIND_CHANNEL_EXPIRED AUDIT_KIND_EXPECTATION_VIOLATED "
        "AUDIT_KIND_RESUME_SET AUDIT_KIND_RULE_SET AUDIT_KIND_SKILL_SET AUDIT_KIND_TASK_TERMINATED "
        "AUDIT_KIND_TURN_FAILED RESUME_SOURCE_OBSERVED RESUME_SOURCE_TENANT AuditLog AuditSubscriber"
    ),
    "ag2net.hub.auth": "AuthAdapter",
    "ag2net.hub.expectations": (
        "AcksWithinEvaluator ExpectationContext ExpectationEvaluator MaxSilenceEvaluator ReplyWithinEvaluator "
        "Violation ViolationHandler default_evaluators"
    ),
    "ag2net.hub.listeners": "BaseHubListener HubListener",
    "ag2net.hub.local": "LocalLink LocalLinkClient LocalLinkEndpoint",
    "ag2net.hub.records": "AuditHandler AutoCloseHandler NotifyChannelHandler default_handlers",
    "ag2net.hub.remote": "RemoteAgentProxy",
    "ag2net.server": "serve_cli serve_ws",
    "ag2net.store": "MemoryStore SqliteStore Store StoreError open_store",
    "ag2net.transport.ws": "ConnectionLostError WsLink WsLinkClient WsLinkEndpoint",
}
_LAZY: dict[str, str] = {name: module for module, names in _LAZY_MODULES.items() for name in names.split()}


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
