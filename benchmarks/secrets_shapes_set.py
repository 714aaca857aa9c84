"""Writes tests/data/secrets_shapes.json: secrets as people write them, and look-alikes from real logs.

The first set (benchmarks/secrets_set.py) puts each format in a prompt, a command and an output.
This one follows the shapes met in real transcripts and public issue threads: a key named in a
sentence with its value before or after it ("this is the NewsAPI key …", "… this is the spotify
client secret"), of any alphabet, hex included; a URL's query parameter (`&appid=…`, `?apiKey=`,
`&sig=`, `X-Amz-Signature=`); pasted `.env` files, JSON and YAML configs; `curl -u`, database
clients and connection strings; cloud CLI output. Its look-alikes are what a coding session is
full of: git log, rebase, push and submodule output, lockfile integrity lines and hashes, docker
digests and container ids, UUIDs and trace ids, CSS colours, base64 fixtures, hashed file names,
pinned action SHAs, placeholders in `.env.example`, and a hash the user asks about.

Every value is generated here from a fixed seed (fake values in the real formats; nothing real).
Items go to a "tune" or a "report" half by a hash of their text, so neither half is chosen by hand.

    python -m benchmarks.secrets_shapes_set       # rewrites tests/data/secrets_shapes.json
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
from urllib.parse import quote

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "secrets_shapes.json"
R = random.Random(46)
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER_ALNUM = string.ascii_uppercase + string.digits
B32 = string.ascii_uppercase + "234567"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    # At least one digit and one letter, as generated keys have.
    while True:
        s = "".join(R.choice(alphabet) for _ in range(n))
        mixed = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
        if not mixed or (any(c.isdigit() for c in s) and any(c.isalpha() for c in s)):
            return s


def hexs(n: int) -> str:
    return rnd(n, HEX)


def b64(n: int) -> str:
    return base64.b64encode(R.randbytes(n)).decode()


def b64url(n: int) -> str:
    return base64.urlsafe_b64encode(R.randbytes(n)).decode().rstrip("=")


def a_uuid() -> str:
    return str(uuid.UUID(int=R.getrandbits(128), version=4))


def password() -> str:
    """A password as people choose them: a word, digits, a symbol (8 to 14 characters)."""
    word = R.choice(["Summer", "Pizza", "dragon", "Monkey", "sunshine", "Lagos", "Porto", "Kimchi", "Blue", "tiger"])
    return word + str(R.randint(10, 9999)) + R.choice("!#@$%&*?") + R.choice(["", rnd(2, string.ascii_letters)])


def django_key() -> str:
    return "django-insecure-" + "".join(
        R.choice(string.ascii_lowercase + string.digits + "!@#%^&*(-_=+)") for _ in range(50)
    )


SERVICES = [
    "NewsAPI",
    "OpenWeather",
    "TMDB",
    "Spotify",
    "Mailgun",
    "Algolia",
    "Alpha Vantage",
    "CoinGecko",
    "RapidAPI",
    "Weatherstack",
    "Mapbox",
    "Pexels",
    "Unsplash",
    "YouTube Data",
    "Twelve Data",
]


def key_value() -> str:
    """The value of a service's API key: the alphabets such keys come in."""
    return R.choice(
        [
            lambda: hexs(32),
            lambda: hexs(40),
            lambda: rnd(32),
            lambda: rnd(40),
            lambda: hexs(64),
            lambda: rnd(24, UPPER_ALNUM),
        ]
    )()


# -- secrets in the contexts people put them ----------------------------------------------------------
def secret_items() -> list[tuple[str, str, str, list[str]]]:
    """(kind, where, text, secret values) for every secret item."""
    out: list[tuple[str, str, str, list[str]]] = []

    def add(kind: str, where: str, text: str, *values: str) -> None:
        for v in values:
            assert v in text, (kind, text)
        out.append((kind, where, text, list(values)))

    # A key named in a sentence, the value after the name.
    prose_after = [
        "this is the {svc} key {v} and the one for the weather is still missing",
        "here is my {svc} api key: {v}",
        "The {svc} API key is {v}, put it in the .env please",
        "use this token {v} for the {svc} calls",
        "ok I created a new {svc} key -> {v}",
        "{svc} secret key = {v} (the old one was revoked)",
        "my {svc} access token is {v} can you wire it up",
        "the {svc} client secret is {v}",
        "api key {v} for {svc}, don't commit it",
        "Key: {v}",
        "here's the app secret {v} from the {svc} dashboard",
        "voici la clé API {svc} : {v}",
        "a chave da API do {svc} é {v}",
        "the session secret should be {v} in prod",
        "I regenerated the webhook secret, new one: {v}",
    ]
    for _ in range(45):
        v, svc = key_value(), R.choice(SERVICES)
        add("prose_key_after", "prompt", R.choice(prose_after).format(svc=svc, v=v), v)
    # The value before the name.
    prose_before = [
        "{v} this is the {svc} client secret",
        "{v} is my {svc} key",
        "{v} - that's the {svc} api key",
        "{v} (the {svc} token)",
        "{a} this is the spotify client id, {v} this is the spotify client secret",
        "{v}, this is the session secret",
    ]
    for _ in range(20):
        v, svc = key_value(), R.choice(SERVICES)
        add("prose_key_before", "prompt", R.choice(prose_before).format(svc=svc, v=v, a=hexs(32)), v)
    # Passwords named in a sentence.
    for _ in range(12):
        pw = password()
        add(
            "prose_password",
            "prompt",
            R.choice(
                [
                    f"the ssh password for the pi is {pw}",
                    f"log in as admin, password: {pw}",
                    f"my wifi password is {pw} if you need it for the router config",
                    f"user deploy / password {pw}",
                    f"le mot de passe root est {pw}",
                    f"a senha do banco é {pw}",
                ]
            ),
            pw,
        )
    # A URL's query parameter.
    urls = [
        ("appid", "curl 'https://api.openweathermap.org/data/2.5/weather?q=Lagos&appid={v}&units=metric'"),
        ("appid", 'requests.get(f"https://api.openweathermap.org/data/2.5/forecast?lat=6.45&lon=3.39&appid={v}")'),
        ("apiKey", "GET https://newsapi.org/v2/top-headlines?country=ng&apiKey={v}&pageSize=20"),
        ("api_key", "https://api.themoviedb.org/3/movie/550?api_key={v}&language=en-US"),
        ("key", "https://www.googleapis.com/youtube/v3/search?part=snippet&q=lofi&key={v}&maxResults=5"),
        ("access_token", "https://graph.facebook.com/v19.0/me?fields=id,name&access_token={v}"),
        ("token", "wss://stream.example.io/v1/feed?token={v}&symbols=BTC,ETH"),
        ("apikey", "https://www.alphavantage.co/query?function=TIME_SERIES_DAILY&symbol=IBM&apikey={v}"),
        ("client_secret", "POST /oauth/token?grant_type=client_credentials&client_id=app-web&client_secret={v}"),
        (
            "sig",
            "https://acmestore.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-31T00:00:00Z&sig={v}",
        ),
        (
            "X-Amz-Signature",
            "https://acme-uploads.s3.eu-west-1.amazonaws.com/a.png?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261207T120000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={v}",
        ),
        ("password", "jdbc:mysql://db.internal:3306/shop?user=shop&password={v}&useSSL=false"),
        ("auth", "https://hooks.example.net/notify?channel=ops&auth={v}"),
        ("api-key", "http://localhost:8080/v1/search?q=chairs&api-key={v}"),
    ]
    for i in range(30):
        name, url = urls[i % len(urls)]
        if name == "sig":
            v = quote(b64(32), safe="")
        elif name == "X-Amz-Signature":
            v = hexs(64)
        elif name == "password":
            v = password().replace("&", "x").replace("#", "x").replace("?", "x")
        else:
            v = key_value()
        text = url.format(v=v)
        where = "command" if text.startswith(("curl", "requests", "GET", "POST")) else "url"
        add(
            f"url_{name.lower()}",
            where,
            R.choice(["{}", "the request was {}", "$ {}", "fetching {} failed with 401"]).format(text),
            v,
        )
    # Pasted .env files.
    for _ in range(10):
        news, spot, sess, pw = hexs(32), hexs(32), hexs(64), password()
        text = (
            f"NODE_ENV=development\nPORT=3000\nNEWS_API_KEY={news}\nSPOTIFY_CLIENT_ID={hexs(32)}\n"
            f"SPOTIFY_CLIENT_SECRET={spot}\nSESSION_SECRET={sess}\n"
            f"DATABASE_URL=postgres://app:{pw}@localhost:5432/app\nLOG_LEVEL=debug"
        )
        add("dotenv", "prompt", R.choice(["here is my .env:\n", "", "cat .env\n"]) + text, news, spot, sess, pw)
    # JSON and YAML configs.
    for _ in range(8):
        cs, ak = "GOCSPX-" + b64url(21), key_value()
        add(
            "json_config",
            "output",
            json.dumps(
                {
                    "web": {
                        "client_id": f"{R.randint(10**11, 10**12)}-{rnd(32, string.ascii_lowercase + string.digits)}.apps.googleusercontent.com",
                        "project_id": "acme-web",
                        "client_secret": cs,
                        "redirect_uris": ["http://localhost:3000/callback"],
                    },
                    "apiKey": ak,
                },
                indent=2,
            ),
            cs,
            ak,
        )
    for _ in range(8):
        pw, tok = password(), rnd(40)
        add(
            "yaml_config",
            "output",
            R.choice(
                [
                    f"services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_USER: app\n      POSTGRES_PASSWORD: {pw}\n  bot:\n    environment:\n      DISCORD_TOKEN: {tok}",
                    f"spring:\n  datasource:\n    url: jdbc:postgresql://db:5432/shop\n    username: shop\n    password: {pw}\napp:\n  jwt-secret: {tok}",
                ]
            ),
            pw,
            tok,
        )
    for _ in range(6):
        enc = base64.b64encode(password().encode()).decode()
        add(
            "k8s_secret",
            "output",
            f"apiVersion: v1\ndata:\n  password: {enc}\n  username: YWRtaW4=\nkind: Secret\nmetadata:\n  name: db-credentials\n  namespace: prod\ntype: Opaque",
            enc,
        )
    # curl -u, database clients, connection strings.
    for _ in range(8):
        pw = password()
        add(
            "curl_user",
            "command",
            R.choice(
                [
                    f"curl -u admin:{pw} https://jenkins.internal/api/json",
                    f"curl -s --user 'deploy:{pw}' -X POST https://registry.internal/v2/_catalog",
                ]
            ),
            pw,
        )
    for _ in range(6):
        pw = password().replace("!", "x")
        add(
            "db_client_password",
            "command",
            R.choice(
                [
                    f"mysql -h 127.0.0.1 -u root -p{pw} shop < dump.sql",
                    f"sshpass -p '{pw}' ssh pi@192.168.1.40",
                    f"redis-cli -h cache -a {pw} ping",
                    f"docker login registry.internal -u ci -p {pw}",
                ]
            ),
            pw,
        )
    for _ in range(12):
        pw = password().replace("@", "x").replace("#", "x").replace("?", "x")
        add(
            "connection_string",
            R.choice(["prompt", "output"]),
            R.choice(
                [
                    f"MONGO_URI=mongodb+srv://admin:{pw}@cluster0.x7k2p.mongodb.net/app?retryWrites=true&w=majority",
                    f"Server=tcp:acme.database.windows.net,1433;Initial Catalog=shop;User ID=sa;Password={pw};Encrypt=True;",
                    f"redis://:{pw}@cache.internal:6379/0",
                    f"amqp://guest:{pw}@rabbit:5672/",
                    f'psql "host=db.internal port=5432 dbname=app user=app password={pw} sslmode=require"',
                    f"connecting to postgresql://app:{pw}@10.0.0.12:5432/app failed: timeout",
                ]
            ),
            pw,
        )
    # Cloud CLI output.
    for _ in range(6):
        ak, sk, st = "ASIA" + rnd(16, UPPER_ALNUM), b64(30), b64(180)
        add(
            "aws_sts_output",
            "output",
            json.dumps(
                {
                    "Credentials": {
                        "AccessKeyId": ak,
                        "SecretAccessKey": sk,
                        "SessionToken": st,
                        "Expiration": "2026-12-07T18:06:10+00:00",
                    }
                },
                indent=4,
            ),
            ak,
            sk,
            st,
        )
    for _ in range(5):
        sk = b64(30)
        add(
            "aws_configure",
            "output",
            f"$ aws configure\nAWS Access Key ID [None]: AKIA{rnd(16, UPPER_ALNUM)}\nAWS Secret Access Key [None]: {sk}\nDefault region name [None]: eu-west-1",
            sk,
        )
    for _ in range(5):
        pw = rnd(34, ALNUM + "~._-")
        add(
            "az_sp_output",
            "output",
            json.dumps({"appId": a_uuid(), "displayName": "ci-deploy", "password": pw, "tenant": a_uuid()}, indent=2),
            pw,
        )
    for _ in range(4):
        t = "1//0" + rnd(2) + b64url(70)
        add(
            "firebase_ci_token",
            "output",
            f'✔  Success! Use this token to login on a CI server:\n\n{t}\n\nExample: firebase deploy --token "$FIREBASE_TOKEN"',
            t,
        )
    for _ in range(4):
        t = a_uuid()
        add(
            "heroku_token",
            "output",
            R.choice(
                [
                    f"$ heroku authorizations:create\nClient:      <none>\nID:          {a_uuid()}\nDescription: Long-lived user authorization\nScope:       global\nToken:       {t}",
                    f"the heroku api key is {t}",
                ]
            ),
            t,
        )
    # Commands that set or pass a key.
    for _ in range(10):
        v = key_value()
        add(
            "command_key",
            "command",
            R.choice(
                [
                    f"export OPENWEATHER_API_KEY={v}",
                    f'gh secret set NEWS_API_KEY --body "{v}"',
                    f'firebase functions:config:set newsapi.key="{v}"',
                    f"docker run -e TMDB_API_KEY={v} -p 8000:8000 movies:dev",
                    f"python fetch.py --api-key {v} --city Lagos",
                    f"heroku config:set SPOTIFY_CLIENT_SECRET={v} -a tunes",
                ]
            ),
            v,
        )
    # Logs and errors that echo a key.
    for _ in range(8):
        v = key_value()
        add(
            "log_key",
            "output",
            R.choice(
                [
                    f'urllib3.connectionpool DEBUG https://api.openweathermap.org:443 "GET /data/2.5/weather?q=Lagos&appid={v} HTTP/1.1" 401 107',
                    f"INFO  Using API key {v} for newsapi",
                    f'{{"status":"error","code":"apiKeyInvalid","message":"Your API key is invalid or incorrect. Check your key, or go to https://newsapi.org to create a free API key."}} (key {v})',
                    f"Error: Request failed with status code 401 at https://api.themoviedb.org/3/search/movie?query=dune&api_key={v}",
                ]
            ),
            v,
        )
    # A diff of a config file: the key on the added line (and the old one on the removed line).
    for _ in range(8):
        old, new = key_value(), key_value()
        if R.random() < 0.5:
            add(
                "diff_key",
                "output",
                f"-NEWS_API_KEY=YOUR_NEWS_API_KEY  # placeholder\n+NEWS_API_KEY={new}  # the real key",
                new,
            )
        else:
            add(
                "diff_key",
                "output",
                f"@@ -3,2 +3,2 @@\n-OPENWEATHER_API_KEY={old}\n+OPENWEATHER_API_KEY={new}",
                old,
                new,
            )
    # A devcontainer's secrets: the value in an object under the secret's name (as Read shows a file).
    for _ in range(6):
        v = key_value()
        add(
            "json_nested",
            "output",
            R.choice(
                [
                    f'  "secrets": {{\n    "VITE_OPENWEATHER_API_KEY": {{\n      "description": "{v}"\n    }}\n  }},',
                    f'    28→  "secrets": {{\n    29→    "TMDB_API_KEY": {{\n    30→      "value": "{v}"\n    31→    }}',
                ]
            ),
            v,
        )
    # An expect script that answers the SSH password prompt (run through a shell, quotes escaped).
    for _ in range(6):
        pw = password().replace("\\", "x")
        add(
            "expect_send",
            "command",
            R.choice(
                [
                    f'expect -c \'spawn ssh pi@192.168.1.40\nexpect "*password*"\nsend "{pw}\\r"\ninteract\'',
                    f'bash -c "expect -c \'spawn ssh deploy@10.0.0.12; expect {{ \\"*assword:*\\" {{ send \\"{pw}\\r\\" }} }}\'"',
                ]
            ),
            pw,
        )
    return out


# -- look-alikes from real logs and lockfiles -----------------------------------------------------------
SUBJECTS = [
    "Rotate API key handling in the weather client",
    "fix token refresh when the session expires",
    "Add password reset flow",
    "Move secrets to the environment",
    "bump lodash from 4.17.20 to 4.17.21",
    "Merge pull request #42 from acme/fix-auth",
    "docs: explain where the NewsAPI key goes",
    "refactor: split the key store",
    "test: cover the expired token path",
    "chore(deps): update actions/checkout action to v4",
    'Revert "Add client secret validation"',
    "feat(auth): hash passwords with argon2",
]
NAMES = ["Ana Lima", "Kofi Mensah", "Yuki Tanaka", "Priya Rao", "Lukas Weber", "dependabot[bot]"]
PACKAGES = [
    "lodash",
    "react-dom",
    "@babel/core",
    "typescript",
    "eslint-plugin-import",
    "vite",
    "axios",
    "@types/node",
    "zod",
    "chalk",
]


def version() -> str:
    return f"{R.randint(0, 18)}.{R.randint(0, 30)}.{R.randint(0, 20)}"


def look_alikes() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []

    def add(kind: str, text: str) -> None:
        out.append((kind, text))

    for _ in range(45):  # git log
        sha, who = hexs(40), R.choice(NAMES)
        add(
            "git_log",
            R.choice(
                [
                    f"commit {sha}\nAuthor: {who} <{who.split()[0].lower()}@example.com>\nDate:   Mon Dec 7 10:{R.randint(10, 59)}:02 2026 +0100\n\n    {R.choice(SUBJECTS)}",
                    f"commit {sha} (HEAD -> main, origin/main)\nMerge: {hexs(7)} {hexs(7)}\nAuthor: {who}\n\n    {R.choice(SUBJECTS)}",
                    "\n".join(f"{hexs(7)} {R.choice(SUBJECTS)}" for _ in range(R.randint(3, 6))),
                    f"* {hexs(7)} (HEAD -> feature/api-key) {R.choice(SUBJECTS)}\n* {hexs(7)} {R.choice(SUBJECTS)}",
                    f"{sha} {R.choice(SUBJECTS)}",
                ]
            ),
        )
    for _ in range(45):  # git commands and their output
        a, b = hexs(40), hexs(40)
        add(
            "git_command",
            R.choice(
                [
                    f"pick {a[:7]} {R.choice(SUBJECTS)}\nsquash {b[:7]} {R.choice(SUBJECTS)}",
                    f"To github.com:acme/api.git\n   {a[:7]}..{b[:7]}  main -> main",
                    f"git cherry-pick {a}",
                    f"git diff {a[:12]}..{b[:12]} -- src/auth/token.ts",
                    f"HEAD is now at {a[:7]} {R.choice(SUBJECTS)}",
                    f"{a}\trefs/heads/main\n{b}\trefs/tags/v{version()}",
                    f" +{a} vendor/libsodium (1.0.18-{R.randint(1, 90)}-g{b[:7]})",
                    f"Checking out {a[:8]} as detached HEAD (ref is main)...",
                    f"{a[:8]} (Ana Lima 2026-12-04 10:12:33 +0100 42)     const key = process.env.NEWS_API_KEY;",
                    f"git rebase --onto {a[:7]} {b[:7]}",
                    f"fatal: bad object {a}",
                    f"git bisect bad {a}",
                    f"{a[:7]} HEAD@{{{R.randint(0, 30)}}}: commit: {R.choice(SUBJECTS)}",
                    f"[main {a[:7]}] {R.choice(SUBJECTS)}\n 3 files changed, {R.randint(2, 90)} insertions(+), {R.randint(1, 40)} deletions(-)",
                ]
            ),
        )
    for _ in range(50):  # lockfiles
        pkg, ver = R.choice(PACKAGES), version()
        add(
            "lockfile",
            R.choice(
                [
                    f'    "node_modules/{pkg}": {{\n      "version": "{ver}",\n      "resolved": "https://npm.mirror.example/{pkg}/-/{pkg.split("/")[-1]}-{ver}.tgz",\n      "integrity": "sha512-{b64(64)}",\n      "dev": true\n    }}',
                    f'{pkg}@^{ver}:\n  version "{ver}"\n  resolved "https://npm.mirror.example/{pkg}/-/{pkg.split("/")[-1]}-{ver}.tgz#{hexs(40)}"\n  integrity sha512-{b64(64)}',
                    f"  /{pkg}@{ver}:\n    resolution: {{integrity: sha512-{b64(64)}}}\n    dev: true",
                    f'[[package]]\nname = "requests"\nversion = "2.32.3"\nfiles = [\n    {{file = "requests-2.32.3-py3-none-any.whl", hash = "sha256:{hexs(64)}"}},\n]',
                    f"requests==2.32.3 \\\n    --hash=sha256:{hexs(64)} \\\n    --hash=sha256:{hexs(64)}",
                    f'[[package]]\nname = "serde"\nversion = "1.0.{R.randint(100, 220)}"\nsource = "registry+https://git.example/crates-index"\nchecksum = "{hexs(64)}"',
                    f"golang.org/x/crypto v0.{R.randint(10, 40)}.0 h1:{b64(32)}\ngolang.org/x/crypto v0.{R.randint(10, 40)}.0/go.mod h1:{b64(32)}",
                    f'        "nixpkgs": {{\n          "lastModified": 1733{R.randint(100000, 999999)},\n          "narHash": "sha256-{b64(32)}",\n          "rev": "{hexs(40)}",\n          "type": "github"\n        }}',
                    f'            "dist": {{\n                "type": "zip",\n                "reference": "{hexs(40)}",\n                "shasum": ""\n            }}',
                    f'{{ name = "httpx", version = "0.28.1", source = {{ registry = "https://pkgs.example/simple" }}, sdist = {{ hash = "sha256:{hexs(64)}" }} }}',
                ]
            ),
        )
    for _ in range(35):  # docker
        d, cid = hexs(64), hexs(64)
        add(
            "docker",
            R.choice(
                [
                    f"Digest: sha256:{d}\nStatus: Downloaded newer image for postgres:16",
                    f"FROM python:3.12-slim@sha256:{d}",
                    f"docker pull registry.example/acme/api@sha256:{d}",
                    f" => => writing image sha256:{d}  0.0s\n => => naming to registry.example/library/api:dev",
                    f"{cid}",
                    f'CONTAINER ID   IMAGE         COMMAND                  STATUS\n{cid[:12]}   postgres:16   "docker-entrypoint.s…"   Up 2 hours',
                    f"docker logs -f {cid[:12]}",
                    f"REPOSITORY   TAG   DIGEST                                                                    IMAGE ID\napi          dev   sha256:{d}   {cid[:12]}",
                    f"{hexs(12)}: Pull complete\n{hexs(12)}: Pull complete\n{hexs(12)}: Already exists",
                    f"Error response from daemon: No such container: {cid[:12]}",
                ]
            ),
        )
    for _ in range(45):  # UUIDs and trace ids
        u = a_uuid()
        add(
            "uuid",
            R.choice(
                [
                    f"x-request-id: {u}",
                    f'{{"sessionId": "{u}", "projectHash": "{hexs(64)}"}}',
                    f'  uid: {u}\n  resourceVersion: "{R.randint(1000, 99999)}"',
                    f"RequestId: {u} Duration: {R.randint(2, 900)}.{R.randint(10, 99)} ms Billed Duration: {R.randint(2, 900)} ms",
                    f"traceparent: 00-{hexs(32)}-{hexs(16)}-01",
                    f'trace_id={hexs(32)} span_id={hexs(16)} level=error msg="upstream timeout"',
                    f"~/.claude/projects/-home-ana-src-api/{u}.jsonl",
                    f"what does the foreign key {u} point to?",
                    f"the primary key of that row is {u}",
                    f'ETag: "{hexs(32)}"',
                    f"Idempotency-Key: {u}",
                    f"the token usage for run {u} was 18,234 input tokens",
                ]
            ),
        )
    for _ in range(40):  # CSS
        c1, c2 = hexs(6), R.choice([hexs(3), hexs(6), hexs(8)])
        add(
            "css",
            R.choice(
                [
                    f".token.keyword {{ color: #{c1}; }}\n.token.string {{ color: #{c2}; }}",
                    f":root {{\n  --primary: #{c1};\n  --accent: #{c2};\n}}",
                    f"background: linear-gradient(90deg, #{c1} 0%, #{c2} 100%);",
                    f"primary: {{ 500: '#{c1}', 600: '#{c2}' }},",
                    f'<rect fill="#{c1}" stroke="#{c2}" width="24" height="24"/>',
                    f"@keyframes pulse {{ 0% {{ box-shadow: 0 0 0 0 #{c1}; }} }}",
                    f".secret-banner {{ border: 1px solid #{c1}; color: #{c2}; }}",
                ]
            ),
        )
    for _ in range(35):  # base64 fixtures and data
        add(
            "base64_fixture",
            R.choice(
                [
                    f'FIXTURE_PNG = "{b64(48)}"',
                    f'expect(decode("{b64(24)}")).toEqual(payload);',
                    f'<img src="data:image/png;base64,{b64(60)}">',
                    f'  "avatar": "{b64(45)}",',
                    f"assert base64.b64decode('{b64(30)}') == raw",
                    f"    body: '{b64(33)}'",
                    f"sourceMappingURL=data:application/json;base64,{b64(90)}",
                ]
            ),
        )
    for _ in range(30):  # hashed file names, build ids, caches
        add(
            "hashed_name",
            R.choice(
                [
                    f"dist/assets/index-{b64url(6)}.js   {R.randint(10, 900)}.{R.randint(10, 99)} kB │ gzip: {R.randint(5, 300)}.{R.randint(10, 99)} kB",
                    f"static/js/main.{hexs(8)}.chunk.js",
                    f"~/.gemini/tmp/{hexs(64)}/chats/session-2026-04-12T10-31-{hexs(8)}.json",
                    f"Created wheel for numpy: filename=numpy-2.1.3-cp312-cp312-linux_x86_64.whl size=1834121 sha256={hexs(64)}\n  Stored in directory: /root/.cache/pip/wheels/{hexs(2)}/{hexs(2)}/{hexs(60)}",
                    f"__pycache__/token_store.cpython-312.{hexs(16)}.pyc",
                    f"node_modules/.cache/babel-loader/{hexs(32)}.json",
                    f"Build ID: {b64url(16)}",
                    f"  uses: actions/checkout@{hexs(40)} # v4.2.2",
                    f"pkg @ git+https://github.com/acme/tokenizer@{hexs(40)}",
                    f"Compiled successfully. File sizes after gzip:\n  52.3 kB  build/static/js/main.{hexs(8)}.js",
                ]
            ),
        )
    for _ in range(30):  # a hash the user asks about, checksums
        h = R.choice([hexs(64), hexs(40), hexs(32)])
        add(
            "hash_asked",
            R.choice(
                [
                    f"what is this hash {h}? it shows up in the release notes",
                    f"is {h} the sha256 of the installer?",
                    f"{h}  engram-0.4.0.tar.gz",
                    f"compare {h} with the checksum on the download page",
                    f"sha256sum says {h}, the page says something else",
                    f"why does `git show {h[:10]}` say unknown revision?",
                    f"SHA256 (node-v22.12.0-darwin-arm64.tar.gz) = {hexs(64)}",
                    f"The key fingerprint is SHA256:{b64(32).rstrip('=')} ana@laptop",
                    f'gpg: key {hexs(16).upper()}: public key "Ana Lima <ana@example.com>" imported',
                    f"the cache key is {hexs(40)} so the restore missed",
                ]
            ),
        )
    for _ in range(30):  # placeholders and references in configs (named like secrets, no secret)
        add(
            "placeholder",
            R.choice(
                [
                    "OPENWEATHER_API_KEY=your_api_key_here",
                    "NEWS_API_KEY=\nSPOTIFY_CLIENT_SECRET=\nSESSION_SECRET=",
                    "        token: ${{ secrets.GITHUB_TOKEN }}",
                    "  password: ${DB_PASSWORD}",
                    "const url = `https://api.openweathermap.org/data/2.5/weather?q=${city}&appid=${process.env.OWM_KEY}`;",
                    "https://newsapi.org/v2/everything?q=tesla&apiKey=API_KEY",
                    "curl -u $USER:$TOKEN https://api.example.com/me",
                    f"SECRET_KEY = os.environ['SECRET_KEY']  # line {R.randint(10, 99)}",
                    "apiKey: process.env.NEXT_PUBLIC_FIREBASE_API_KEY,",
                    "https://api.themoviedb.org/3/movie/550?api_key=<your key>",
                    '"client_secret": "<CLIENT_SECRET>",',
                    "mysql -u root -p shop",
                    "Enter the API key when prompted; it is stored in ~/.config/weather/key",
                    "the token expired again, can you add a refresh?",
                    "set max_tokens=4096 and temperature=0.2",
                ]
            ),
        )
    for _ in range(45):  # ordinary URLs with query strings
        add(
            "url",
            R.choice(
                [
                    f"https://github.com/acme/api/compare/{hexs(7)}...{hexs(7)}",
                    f"https://api.example.com/v1/items?page={R.randint(2, 90)}&per_page=50&sort=created_at",
                    f"https://www.youtube.com/watch?v={b64url(8)[:11]}&t={R.randint(10, 900)}s",
                    f"https://ci.example.com/job/api/{R.randint(100, 9999)}/console?key_format=short",
                    f"https://maps.example.com/search?q=Lagos&zoom={R.randint(3, 18)}&lang=en",
                    f"https://cdn.example.com/assets/app.js?v={hexs(8)}",
                    f"https://storage.example.com/o/{a_uuid()}?alt=media",
                    f"http://localhost:3000/callback?code=4%2F0A{b64url(20)}&state={hexs(16)}&scope=email",
                ]
            ),
        )
    return out


def build() -> dict:
    items = [{"kind": k, "where": w, "text": t, "secrets": v} for k, w, t, v in secret_items()]
    seen: set[str] = set()  # a template drawn twice with no random part: one item
    items += [
        {"kind": k, "where": "look-alike", "text": t, "secrets": []}
        for k, t in look_alikes()
        if not (t in seen or seen.add(t))
    ]
    for it in items:
        it["split"] = "tune" if hashlib.sha256(it["text"].encode()).digest()[0] % 2 == 0 else "report"
    return {
        "about": "Fake secrets in the shapes people write them, and look-alikes from real logs and lockfiles; "
        "generated by benchmarks/secrets_shapes_set.py (seed 46); nothing real.",
        "items": items,
    }


if __name__ == "__main__":
    data = build()
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    secrets = sum(len(it["secrets"]) for it in data["items"])
    looks = sum(1 for it in data["items"] if not it["secrets"])
    kinds = len({it["kind"] for it in data["items"] if it["secrets"]})
    print(f"{OUT.name}: {secrets} secrets of {kinds} kinds, {looks} look-alikes")
