"""ag2net: an independent implementation of the AG2 agent network (the seed's public names)."""

from ag2net.adapters import (
    AgentTarget,
    Always,
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
    default_adapters,
    make_say_tool,
)
from ag2net.agent import Agent, AgentReply, OpenAIChatModel, ScriptedModel, tool_call
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
    stamp_dependencies,
)
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
from ag2net.hub import ApiKeyAuth, AuthRegistry, Hub, NoAuth, ObservedEvent
from ag2net.identity import (
    AccessBlock,
    AuthBlock,
    CostProfile,
    InboxBlock,
    LimitsBlock,
    ObservedStat,
    Passport,
    PassportKind,
    Resume,
    ResumeExample,
    Rule,
    parse_duration,
)
from ag2net.skills import ParsedSkill, parse_skill_frontmatter, render_fallback_skill
from ag2net.store import MemoryStore, SqliteStore, Store
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState
from ag2net.views import (
    FullTranscript,
    NamedTranscript,
    NamedWindowedSummary,
    ViewPolicy,
    WindowedSummary,
    get_view,
    register_view,
    registered_views,
    view_from_spec,
)

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("_")]
