"""Writes tests/data/secrets_set.json: fake secrets in prompts, commands and outputs, and look-alikes.

Every value is generated here from a fixed seed (nothing real): secrets in the shape their issuer
gives them, each placed in a prompt, a shell command and a command's output; and texts that only
look secret (SHAs, UUIDs, hashes, paths, versions, identifiers, base64 in code, chat, errors),
which redaction must leave byte-identical. Items alternate between a "tune" and a "report" half
by a hash of their text, so neither half is chosen by hand.

    python -m benchmarks.secrets_set            # rewrites tests/data/secrets_set.json
"""

# ruff: noqa: E501, C901 - a table of literal texts reads best one text to a line
from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "secrets_set.json"
R = random.Random(39)
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    # At least one digit and one letter, as generated keys have (a 20-letter run would be a word).
    while True:
        s = "".join(R.choice(alphabet) for _ in range(n))
        if alphabet != ALNUM or (any(c.isdigit() for c in s) and any(c.isalpha() for c in s)):
            return s


def b64(n: int) -> str:
    return base64.b64encode(R.randbytes(n)).decode()


def b64url(n: int) -> str:
    return base64.urlsafe_b64encode(R.randbytes(n)).decode().rstrip("=")


def jwt() -> str:
    head = b64url_json({"alg": "HS256", "typ": "JWT"})
    body = b64url_json({"sub": str(R.randint(1000, 99999)), "role": "admin", "exp": 1893456000})
    return f"{head}.{body}.{b64url(32)}"


def b64url_json(v: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(v, separators=(",", ":")).encode()).decode().rstrip("=")


def pem() -> str:
    body = "\n".join(b64(48) for _ in range(4))
    return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"


def password() -> str:
    return rnd(6, string.ascii_lowercase) + R.choice("!#%&*") + rnd(5, string.digits) + rnd(3, string.ascii_uppercase)


# kind -> (the secret value, the text it appears in as a prompt, as a command, as an output)
def secret_kinds() -> dict[str, tuple]:
    kinds = {}

    def add(kind, value, prompt, command, output):
        kinds[kind] = (value, prompt, command, output)

    v = "AKIA" + rnd(16, string.ascii_uppercase + string.digits)
    add(
        "aws_access_key_id",
        v,
        f"The CI user's key id is {v}, can you check its policy?",
        f"aws configure set aws_access_key_id {v}",
        f"InvalidClientTokenId: The security token included in the request is invalid ({v})",
    )
    v = b64(30)
    add(
        "aws_secret_access_key",
        v,
        f"set aws_secret_access_key = {v} in the profile",
        f"export AWS_SECRET_ACCESS_KEY={v}",
        f"[default]\naws_secret_access_key = {v}\nregion = eu-west-1",
    )
    v = "ghp_" + rnd(36)
    add(
        "github_token",
        v,
        f"use my token {v} for the push",
        f"git clone https://{v}@github.com/acme/api.git",
        f"remote: Invalid username or token {v}. Password authentication is not supported.",
    )
    v = "github_pat_" + rnd(22) + "_" + rnd(59)
    add(
        "github_fine_grained",
        v,
        f"here is a fine-grained PAT: {v}",
        f"gh auth login --with-token <<< {v}",
        f"error: token {v} lacks the contents:write permission",
    )
    v = "glpat-" + rnd(20)
    add(
        "gitlab_token",
        v,
        f"The GitLab token for the runner is {v}",
        f'curl --header "PRIVATE-TOKEN: {v}" https://gitlab.example.com/api/v4/projects',
        f"401 Unauthorized for token {v}",
    )
    v = f"xoxb-{R.randint(10**11, 10**12 - 1)}-{R.randint(10**11, 10**12 - 1)}-{rnd(24)}"
    add(
        "slack_bot_token",
        v,
        f"our slack bot token is {v}",
        f"SLACK_BOT={v} python notify.py",
        f"slack_sdk.errors.SlackApiError: invalid_auth (token {v})",
    )
    v = f"https://hooks.slack.com/services/T{rnd(8, string.ascii_uppercase + string.digits)}/B{rnd(8, string.ascii_uppercase + string.digits)}/{rnd(24)}"
    add(
        "slack_webhook",
        v,
        f"post alerts to {v}",
        f'curl -X POST -d \'{{"text":"hi"}}\' {v}',
        f"POST {v} -> 404 no_service",
    )
    v = "sk_live_" + rnd(24)
    add(
        "stripe_key",
        v,
        f"the live Stripe key is {v}, don't commit it",
        f"export STRIPE_KEY={v} && npm start",
        f"StripeAuthenticationError: Invalid API Key provided: {v}",
    )
    v = "AIza" + rnd(35, ALNUM + "_-")
    add(
        "google_api_key",
        v,
        f"maps key: {v}",
        f"curl 'https://maps.googleapis.com/maps/api/geocode/json?address=x&key={v}'",
        f"google.api_core.exceptions.PermissionDenied: API key {v} not valid",
    )
    v = "hf_" + rnd(34)
    add(
        "huggingface_token",
        v,
        f"use hf token {v} to pull the model",
        f"huggingface-cli login --token {v}",
        f"401 Client Error: Unauthorized for url (token {v})",
    )
    v = "npm_" + rnd(36)
    add(
        "npm_token",
        v,
        f"publish with {v}",
        f"echo //registry.npmjs.org/:_authToken={v} > .npmrc",
        f"npm ERR! 403 token {v} has been revoked",
    )
    v = "sk-proj-" + rnd(48, ALNUM + "_-")
    add(
        "openai_key",
        v,
        f"my OpenAI key: {v}",
        f"OPENAI_API_KEY={v} python eval.py",
        f"openai.AuthenticationError: Incorrect API key provided: {v}",
    )
    v = "sk-ant-api03-" + rnd(80, ALNUM + "_-")
    add(
        "anthropic_key",
        v,
        f"try with {v}",
        f"export ANTHROPIC_API_KEY={v}",
        f"anthropic.AuthenticationError: invalid x-api-key {v}",
    )
    v = "SK" + rnd(32, HEX)
    add(
        "twilio_api_key",
        v,
        f"twilio api key sid {v}",
        f"twilio api:core:messages:create --api-key {v}",
        f"TwilioRestException: Authenticate failed for {v}",
    )
    v = f"SG.{rnd(22, ALNUM + '_-')}.{rnd(43, ALNUM + '_-')}"
    add("sendgrid_key", v, f"SendGrid: {v}", f"SENDGRID_API_KEY='{v}' ./send.sh", f"HTTP Error 401: Unauthorized ({v})")
    v = b64(64)
    add(
        "azure_storage_key",
        v,
        f"connection string DefaultEndpointsProtocol=https;AccountName=acmedata;AccountKey={v};EndpointSuffix=core.windows.net",
        f"az storage blob list --account-name acmedata --account-key {v}",
        f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmedata;AccountKey={v}",
    )
    v = jwt()
    add(
        "jwt",
        v,
        f"the session token is {v}",
        f"curl -H 'Authorization: Bearer {v}' https://api.internal/v1/me",
        f"jwt.exceptions.ExpiredSignatureError: Signature has expired: {v}",
    )
    v = pem()
    add(
        "pem_private_key",
        v,
        f"here's the deploy key:\n{v}",
        f"cat > id_rsa <<'EOF'\n{v}\nEOF",
        f"$ cat ~/.ssh/id_rsa\n{v}",
    )
    v = password()
    add(
        "url_password",
        v,
        f"staging db is postgres://deploy:{v}@db.staging.internal:5432/app",
        f"psql postgresql://deploy:{v}@db.staging.internal:5432/app -c 'select 1'",
        f"sqlalchemy.exc.OperationalError: could not connect to mysql://root:{v}@10.0.3.7:3306/shop",
    )
    v = password()
    add(
        "https_url_password",
        v,
        f"the mirror is https://ci-bot:{v}@mirror.example.com/simple",
        f"pip install --index-url https://ci-bot:{v}@mirror.example.com/simple pkg",
        f"fatal: Authentication failed for 'https://ci-bot:{v}@git.example.com/acme/api.git/'",
    )
    v = password()
    add(
        "env_password",
        v,
        f"PGPASSWORD={v} is what ops gave me",
        f"PGPASSWORD={v} psql -h db -U app",
        f"environment: PGPASSWORD={v} PGHOST=db",
    )
    v = password()
    add(
        "quoted_password",
        v,
        f'set DB_PASSWORD="{v}" in .env',
        f'DB_PASSWORD="{v}" docker compose up',
        f'.env: DB_PASSWORD="{v}"',
    )
    v = password()
    add(
        "cli_password_flag",
        v,
        f"run it with --password {v}",
        f"mysql --user=app --password={v} shop",
        f"usage error: mytool --password {v} --verbose: unknown option --verbose",
    )
    v = rnd(32)
    add(
        "cli_token_flag",
        v,
        f"pass --token {v} to the tool",
        f"vault login --token={v}",
        f"Error: --token {v} is expired",
    )
    v = b64(18)
    add(
        "basic_auth_header",
        v,
        f"the header is Authorization: Basic {v}",
        f'curl -H "Authorization: Basic {v}" https://api.example.com',
        f"> GET / HTTP/1.1\n> Authorization: Basic {v}\n< HTTP/1.1 403 Forbidden",
    )
    v = rnd(40)
    add(
        "cookie_header",
        v,
        f"my cookie is Cookie: sessionid={v}",
        f"curl -b 'sessionid={v}' -H 'Cookie: sessionid={v}' https://app.example.com",
        f"< Set-Cookie: sessionid={v}; Path=/; HttpOnly",
    )
    v = "pypi-" + rnd(70, ALNUM + "_-")
    add(
        "pypi_token",
        v,
        f"upload token {v}",
        f"twine upload -u __token__ -p {v} dist/*",
        f"HTTPError: 403 Forbidden: invalid token {v}",
    )
    v = "dop_v1_" + rnd(64, HEX)
    add(
        "digitalocean_token",
        v,
        f"DO token {v}",
        f"doctl auth init -t {v}",
        f"Error: unable to authenticate with token {v}",
    )
    v = rnd(32)
    add(
        "generic_api_key",
        v,
        f"PAYMENTS_API_KEY={v} is the sandbox one",
        f"export PAYMENTS_API_KEY={v}",
        f'config loaded: {{"payments_api_key": "{v}"}}',
    )
    v = rnd(28)
    add(
        "client_secret",
        v,
        f"the OAuth client_secret: {v}",
        f"./oauth-setup --client-secret {v}",
        f"OAUTH_CLIENT_SECRET={v}",
    )
    v = rnd(36, ALNUM + "-_")
    add(
        "bearer_token",
        v,
        f"token for the staging API: Bearer {v}",
        f"http GET api.example.com 'Authorization:Bearer {v}'",
        f"WWW-Authenticate: Bearer realm=api, error=invalid_token (got {v})",
    )
    return kinds


def look_alikes() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []

    def add(kind, text):
        out.append((kind, text))

    for _ in range(14):
        sha = rnd(40, HEX)
        add(
            "git_sha",
            R.choice(
                [
                    f"commit {sha}\nAuthor: Ana <ana@example.com>",
                    f"git checkout {sha[:7]} && pytest",
                    f"HEAD is now at {sha[:7]} fix flaky test",
                    f"reverted {sha} (it broke the build)",
                    f"https://github.com/acme/api/commit/{sha}",
                ]
            ),
        )
    for _ in range(12):
        u = str(uuid.UUID(int=R.getrandbits(128)))
        add(
            "uuid",
            R.choice(
                [f"task {u} is blocked", f"GET /v1/orders/{u} -> 404", f"request_id={u} status=500", f"memory_id: {u}"]
            ),
        )
    for _ in range(12):
        h = hashlib.sha256(R.randbytes(16)).hexdigest()
        add(
            "content_hash",
            R.choice(
                [
                    f"sha256:{h}",
                    f"{h}  dist/engram-0.1.0.tar.gz",
                    f"--hash=sha256:{h}",
                    f"image digest sha256:{h}",
                    f"checksum mismatch: expected {h}",
                ]
            ),
        )
    for _ in range(6):
        add("md5", f"md5sum: {hashlib.md5(R.randbytes(8)).hexdigest()}  backup.tar")
    for _ in range(6):
        add("npm_integrity", f'"integrity": "sha512-{b64(64)}"')
    paths = [
        "/home/ana/src/acme-api/tests/unit/test_tokenizer.py",
        "src/auth/token_refresh.ts",
        "~/.config/secrets-manager/config.yaml",
        "/var/lib/postgresql/16/main/pg_wal/000000010000000A00000042",
        "C:\\Users\\ana\\AppData\\Local\\Temp\\pip-build-7f3k2m",
        "engram/store/redacting.py",
        "node_modules/@aws-sdk/credential-provider-node/dist-cjs/index.js",
        "/etc/ssl/private/",
        "docs/password-reset-flow.md",
        "app/controllers/api_keys_controller.rb",
    ]
    for p in paths:
        add(
            "path",
            R.choice([f"edited {p}", f"FileNotFoundError: [Errno 2] No such file or directory: '{p}'", f"open {p}"]),
        )
    for v in [
        "1.26.4",
        "v2.13.0+cpu",
        "3.11.9",
        "0.0.34",
        "2026.10.19.post1",
        "18.20.4",
        "1.5.0rc2",
        "4.16.0",
        "v0.171.0",
        "12.4.1-cudnn9",
    ]:
        add("version", R.choice([f"pip install numpy=={v}", f"node {v}", f"upgraded to {v}", f"Version: {v}"]))
    for _ in range(12):
        add(
            "base64_in_code",
            R.choice(
                [
                    f'FIXTURE = "{b64(24)}"',
                    f"assert decode('{b64(18)}') == b'ok'",
                    f'const png = "data:image/png;base64,{b64(30)}";',
                    f"blob: '{b64(36)}'",
                ]
            ),
        )
    idents = [
        "TokenizerConfig",
        "refresh_access_token",
        "PasswordResetView",
        "get_secret_value",
        "AUTH_BACKENDS",
        "api_key_header",
        "validate_credentials",
        "SecretsManagerClient",
        "token_bucket_rate",
        "use_auth_token",
        "password_hasher",
        "MAX_TOKENS",
        "KeyError",
        "primary_key",
        "sort_key",
    ]
    for i in idents:
        add(
            "identifier",
            R.choice(
                [
                    f"renamed {i} to {i}_v2",
                    f"def test_{i.lower()}():",
                    f"AttributeError: '{i}' object has no attribute 'x'",
                    f"grep -rn {i} src/",
                ]
            ),
        )
    assigns = [
        "NODE_ENV=production",
        "SORT_KEY=created_at",
        "max_tokens=4096",
        "TOKENIZERS_PARALLELISM=false",
        "PWD=/home/ana/src/api",
        "AUTH_METHOD=oauth",
        "password_min_length=12",
        "TOKEN_TTL=3600",
        "PASSWORD_FILE=/run/secrets/db_password",
        "API_KEY=${API_KEY}",
        "DB_PASSWORD=$DB_PASSWORD",
        "token_type: bearer",
        "auth: true",
        "secret_name: prod/db",
        "primary_key: id",
        "password: <your password>",
        "SECRET_KEY=os.environ['SECRET_KEY']",
        "password=None",
        "--token-file ~/.config/gh/token",
        "api_key: null",
    ]
    for a in assigns:
        add("harmless_assignment", a)
    chats = [
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        "Melanie: That's amazing! What did you talk about?",
        "Caroline: Mostly about transgender stories, it made me feel accepted.",
        "Melanie: I painted a sunrise last year, it's one of my favourites.",
        "Jon: I lost my job as a banker, so I'm starting my own dance studio.",
        "Gina: I opened an online clothing store after losing my job at Door Dash.",
        "Jon: The password to success is hard work, I guess!",
        "Gina: Did you get the token of appreciation I sent you?",
        "John: My secret is to run every morning at 6 before work.",
        "Maria: I volunteered at the homeless shelter on 2023-05-08.",
        "Tim: I'm reading Harry Potter again, book 3 is the best one.",
        "Andrew: We adopted a puppy named Toby from the shelter.",
        "Audrey: Key to a happy dog is long walks and lots of treats.",
        "Nate: I won my third video game tournament, Street Fighter this time!",
        "Joanna: My screenplay got accepted at the film festival in Austin.",
        "Evan: Our trip to Banff was 8 days, we hiked 42 km in total.",
        "Sam: The auth flow was confusing so I asked the support team.",
        "Deborah: I keep my grandmother's recipes in a secret notebook.",
        "Calvin: I signed with a new label on 20 July, and the tour starts in October.",
        "Dave: My car's license plate is 7ABC123, funny, right?",
    ]
    for c in chats:
        add("chat", c)
    errors = [
        'psycopg.OperationalError: password authentication failed for user "app"',
        "fatal: could not read Username for 'https://github.com': terminal prompts disabled",
        "Error: EACCES: permission denied, open '/usr/lib/node_modules/.staging'",
        "botocore.exceptions.NoCredentialsError: Unable to locate credentials",
        "KeyError: 'api_key'",
        "jwt.exceptions.DecodeError: Not enough segments",
        "401 Unauthorized: the token has expired, run `gh auth login` again",
        "ssh: connect to host 10.0.0.12 port 22: Connection refused",
        "ModuleNotFoundError: No module named 'secrets_manager'",
        "AssertionError: assert 'REDACTED' in out",
        "TimeoutError: waited 30.0s for the lock",
        "ERROR: Could not find a version that satisfies the requirement torch==2.13.0",
        "panic: runtime error: index out of range [3] with length 3",
        "java.lang.NullPointerException at com.acme.auth.TokenService.refresh(TokenService.java:88)",
        "warning: LF will be replaced by CRLF in src/auth/password.ts",
    ]
    for e in errors:
        add("error_message", e)
    others = [
        f"ssh-ed25519 {b64(51)} ana@laptop",
        "arn:aws:iam::123456789012:role/ci-deploy",
        "s3://acme-backups/2026/12/04/db.dump",
        "docker pull ghcr.io/acme/api:3f2a9c1",
        "#1e90ff",
        "fe80::1ff:fe23:4567:890a",
        "00:1A:2B:3C:4D:5E",
        "2026-12-04T21:27:15Z",
        "localhost:5432",
        "https://docs.example.org/project/detect-secrets/",
        "https://example.com/reset?step=2&lang=en",
        "postgres://db.internal:5432/app",
        "redis://cache:6379/0",
        "Bearer tokens expire after an hour.",
        "The Authorization header is missing.",
        "git log --oneline | head",
        "kubectl get pods -n auth",
        "pod api-7d4b9c8f6d-x2k9p restarted",
        "Set the token in your shell, never in the repo.",
        "[REDACTED] was already removed",
    ]
    for o in others:
        add("other", o)
    for _ in range(40):  # commands and their outputs without a secret in them
        sha = rnd(40, HEX)
        add(
            "command",
            R.choice(
                [
                    f"$ git rev-parse HEAD\n{sha}",
                    f"$ pytest -q tests/unit\n{R.randint(10, 900)} passed in {R.randint(1, 90)}.{R.randint(0, 9)}s",
                    f"$ docker build -t api:{sha[:12]} .",
                    f"$ ls -la\ntotal {R.randint(8, 90)}\ndrwxr-xr-x  5 ana ana 4096 Dec  4 build",
                    f"$ npm ci\nadded {R.randint(100, 900)} packages in {R.randint(2, 40)}s",
                    f'$ curl -s https://api.example.com/health\n{{"status": "ok", "build": "{sha[:8]}"}}',
                ]
            ),
        )
    return out


def build() -> dict:
    items = []
    for kind, (value, *texts) in secret_kinds().items():
        for where, text in zip(("prompt", "command", "output"), texts):
            assert value in text, (kind, where)
            items.append({"kind": kind, "where": where, "text": text, "secrets": [value]})
    for kind, text in look_alikes():
        items.append({"kind": kind, "where": "look-alike", "text": text, "secrets": []})
    for it in items:
        it["split"] = "tune" if hashlib.sha256(it["text"].encode()).digest()[0] % 2 == 0 else "report"
    return {
        "about": "Fake secrets and look-alikes, generated by benchmarks/secrets_set.py (seed 39); nothing real.",
        "items": items,
    }


if __name__ == "__main__":
    data = build()
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n = sum(1 for it in data["items"] if it["secrets"])
    kinds = len({it["kind"] for it in data["items"] if it["secrets"]})
    print(f"{OUT.name}: {n} secrets of {kinds} kinds, {len(data['items']) - n} look-alikes")
