"""Authentication with RBAC on: who a request's bearer token says it is.

- The cluster's admin token (``EmbeddedCluster(token=...)``) is ``ADMIN``: user
  ``kubernetes-admin`` in ``system:masters``, allowed everything. Without an admin token,
  a request with no ``Authorization`` header is the admin too, so an emulator started
  without a token keeps working for its existing clients.
- A ServiceAccount token from the TokenRequest API authenticates as
  ``system:serviceaccount:<ns>:<name>`` with groups ``system:serviceaccounts``,
  ``system:serviceaccounts:<ns>`` and ``system:authenticated``, the ServiceAccount's uid and
  ``extra["authentication.kubernetes.io/credential-id"] = ["JTI=<jti>"]``, while that
  ServiceAccount exists with the uid the token names. The real server caches successful
  authentications for 10 s, so a deleted ServiceAccount's token works a little longer
  there; here it is refused at once.
- Anything else (a wrong, expired or foreign-audience token, a token of a deleted
  ServiceAccount, another scheme) is 401 ``Unauthorized``.
"""

from __future__ import annotations

from loadtest.apiserver import errors
from loadtest.apiserver.attributes import AUTHENTICATED, MASTERS, UserInfo
from loadtest.apiserver.rbac import service_account_user
from loadtest.apiserver.storage import Storage
from loadtest.apiserver.tokens import TokenIssuer

ADMIN = UserInfo("kubernetes-admin", (MASTERS, AUTHENTICATED))
SERVICE_ACCOUNTS = "/serviceaccounts"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


class Authenticator:
    def __init__(self, storage: Storage, issuer: TokenIssuer, *, admin_token: str | None) -> None:
        self.storage = storage
        self.issuer = issuer
        self.admin_token = admin_token

    def authenticate(self, authorization: str) -> UserInfo:
        """The user of a request's ``Authorization`` header; raises 401 ``Unauthorized``."""
        if not authorization and self.admin_token is None:
            return ADMIN
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise errors.unauthorized()
        if self.admin_token is not None and token == self.admin_token:
            return ADMIN
        user = self._service_account(token.strip())
        if user is None:
            raise errors.unauthorized()
        return user

    def _service_account(self, token: str) -> UserInfo | None:
        claims = self.issuer.verify(token)
        if claims is None:
            return None
        bound = claims.get("kubernetes.io")
        if not isinstance(bound, dict) or not isinstance(bound.get("serviceaccount"), dict):
            return None
        namespace, account = str(bound.get("namespace", "")), bound["serviceaccount"]
        name, uid = str(account.get("name", "")), str(account.get("uid", ""))
        stored = self.storage.table(SERVICE_ACCOUNTS).get(namespace, name)
        if stored is None or stored.meta.get("uid") != uid or stored.meta.get("deletionTimestamp"):
            return None
        return UserInfo(
            service_account_user(namespace, name),
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
            uid=uid,
            extra={CREDENTIAL_ID: (f"JTI={claims.get('jti', '')}",)},
        )
