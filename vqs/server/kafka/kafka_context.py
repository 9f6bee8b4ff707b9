"""What the Kafka listener's handlers share (``KafkaContext``): the broker, the settings, the
advertised address, the worker pool, the encoded-batch cache, credentials, ACLs and the server's
byte budgets. One per listener, made when it starts; read by every connection's handlers on
the listener's loop (the pool's calls and the broker are the only other threads)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from ..auth_failures import AuthFailures
from ..byte_budget import ByteBudget, in_flight_budget, pre_auth_budget
from ..context import configure_groups
from .acls import Acls
from .consumer_protocol import PatternTopics
from .oauthbearer import OAuthBearerValidator
from .records import EncodedCache
from .scram import ScramCredentials
from .tls import PrincipalMapper


class KafkaContext:
    """What the handlers share: the broker, settings, the advertised address, pools, caches."""

    def __init__(self, broker, settings, host: str, port: int, pre_auth: ByteBudget | None = None,
                 in_flight: ByteBudget | None = None, auth_failures: AuthFailures | None = None):
        self.broker = broker
        self.settings = settings
        self.host = host
        self.port = port
        self.node_id = 0
        self.cluster_id = "vqs-" + broker.path.rsplit("/", 1)[-1][:16]
        # blocking calls (an fsync under flush=always, inflating a compressed batch): workers_threads
        self.pool = ThreadPoolExecutor(max_workers=settings.workers_threads, thread_name_prefix="vqs-kafka")
        self.cache = EncodedCache()
        self.inline_writes = settings.flush != "always"
        self.tokens = list(settings.tokens)
        self.users = dict(settings.kafka_users)  # given: Kafka's own passwords instead of the tokens
        self.scram = ScramCredentials(broker.path)  # SASL/SCRAM users (AlterUserScramCredentials)
        # the server's group settings on the broker (the app does the same at its start), and the
        # consumer-protocol groups' pattern subscriptions resolved against the topics
        configure_groups(broker, settings)
        broker.coordinator.consumer.set_resolver(PatternTopics(broker))
        self.acls = Acls(broker.path, settings.kafka_super_users, settings.kafka_allow_if_no_acl)
        # a client certificate's subject -> its principal (tls.py)
        self.principal_mapper = (PrincipalMapper(settings.kafka_tls_principal_mapping_rules)
                                 if settings.kafka_tls_client_ca else None)
        # SASL/OAUTHBEARER: tokens an identity provider signed (oauthbearer.py)
        self.oauth = OAuthBearerValidator(settings) if settings.kafka_oauthbearer_jwks else None
        # any credential configured: SASL is needed (SigV4 keys grant SQS only)
        self.auth_required = settings.auth_enabled or self.oauth is not None
        # frames read before SASL are held against the first, every frame against the second
        # while it is read and handled (each shared with the HTTP fronts: byte_budget.py)
        self.pre_auth = pre_auth or pre_auth_budget(settings.max_pre_auth_bytes)
        self.in_flight = in_flight or in_flight_budget(settings.max_request_bytes_in_flight)
        # failed SASL logins, counted and logged as every front's (auth_failures.py)
        self.auth_failures = auth_failures or AuthFailures()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping = False
        self.share_sessions: dict = {}  # (group, member) -> share session (share.py)

    async def blocking(self, fn, *args):
        """A call that may block on I/O, in the pool (never one that waits for other clients)."""
        return await self.loop.run_in_executor(self.pool, fn, *args)
