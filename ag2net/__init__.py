"""ag2net: an independent implementation of the AG2 agent network (the seed's public names)."""

from ag2net.adapters import (
    AgentTarget,
    Always,
    BaseAdapter,
    ChannelAdapter,
    ContextEquals,
    Finish,
    FromSpeaker,
    Handoff,
    RevertToInitiatorTarget,
    RoundRobinTarget,
    StayTarget,
    TerminateTarget,
    ToolCalled,
    Transition,
    TransitionGraph,
    TransitionRegistry,
    default_adapters,
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
from ag2net.hub import ApiKeyAuth, AuthRegistry, Hub, NoAuth, ObservedEvent, PendingTurn
from ag2net.identity import (
    AccessBlock,
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
from ag2net.skills import ParsedSkill, parse_skill_frontmatter, render_fallback_skill, skill_summary
from ag2net.store import MemoryStore, SqliteStore, Store, StoreError, open_store
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState, task_summary
from ag2net.transport import (
    ConnectionLostError,
    LocalLink,
    LocalLinkClient,
    LocalLinkEndpoint,
    WsLink,
    serve_cli,
    serve_ws,
)
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

# --- ag2.network names, one block per area (issue 14)
# [exports: arbiter]
from ag2net.hub.arbiter import Allow, BaseHubArbiter, Decision, Deny, HubArbiter, RuleBasedArbiter
# [exports: listeners-audit-expectations]
from ag2net.channel import ExpectedTurn
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
from ag2net.hub.listeners import BaseHubListener, HubListener
from ag2net.hub.records import AuditHandler, AutoCloseHandler, NotifyChannelHandler, default_handlers
# [exports: transport]
from ag2net.hub.auth import AuthAdapter
from ag2net.hub.remote import RemoteAgentProxy
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
    WsLinkClient,
    WsLinkEndpoint,
    decode_frame,
    encode_frame,
)
# [exports: adapters-runtime-identity]
from ag2net.adapters import (
    CONSULTING_TYPE,
    CONVERSATION_TYPE,
    DISCUSSION_TYPE,
    ORDERING_ROUND_ROBIN,
    WORKFLOW_TYPE,
    AdapterResult,
    AdapterState,
    ConsultingAdapter,
    ConsultingState,
    ConversationAdapter,
    ConversationState,
    DiscussionAdapter,
    DiscussionState,
    Rendered,
    WorkflowAdapter,
    WorkflowState,
    default_build_packet_envelope,
    default_build_round_envelope,
    default_build_text_envelope,
    default_expected_next,
    default_extract_turn_input,
    default_render_envelope,
    default_tools_for,
    ensure_parts,
)
from ag2net.agent.hooks import BaseMiddleware, HumanInputRequest, TurnContext, TurnContextInject
from ag2net.client.plugin import NetworkContextPolicy
from ag2net.client.runtime import ClientTask, NetworkClient
from ag2net.identity import PASSPORT_KINDS, AgentRuntime
from ag2net.ids import make_id, parse_hub_urn

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("_")]
