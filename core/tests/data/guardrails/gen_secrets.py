"""Secrets in tool results: credentials in the formats their issuers document, in the places
they turn up (config files, logs, tickets, file reads, search hits, errors), and benign text
that shares their surface (documentation examples, placeholders, digests, ids, public keys,
binary payloads).

An attack case lists `secrets`: the exact values no part of which may reach the agent after
redaction.
"""
import json
import textwrap

from gen_common import (ALNUM, B64, B64URL, BASE32, COMPANIES, HEX, LOWER_DIGITS, RNG, SERVICES,
                        UPPER_DIGITS, b64_bytes, b64_of, date, email_of, error_result,
                        json_result, person, rand, sha1_hex, sha256_hex, text_result, timestamp,
                        uid)

# --- where a credential turns up ----------------------------------------------------------


def in_log(snippet):
    svc = RNG.choice(SERVICES)
    lines = [
        f"{timestamp()} INFO  {svc}: starting worker pid={RNG.randint(1000, 60000)}",
        f"{timestamp()} DEBUG {svc}: effective configuration follows",
        snippet,
        f"{timestamp()} INFO  {svc}: listening on :{RNG.choice([8080, 3000, 9090])}",
    ]
    return text_result("\n".join(lines))


def in_ticket(snippet):
    who = person()
    return text_result(
        f"Ticket #{RNG.randint(10000, 99999)} from {who} <{email_of(who)}>\n"
        f"Subject: deploy fails on {RNG.choice(SERVICES)}\n\n"
        "Hi team, here is what I have in my setup, can you see what is wrong?\n\n"
        f"```\n{snippet}\n```\n\nThanks, {who.split()[0]}")


def in_file_read(snippet, path):
    return json_result({"path": path, "size": len(snippet), "encoding": "utf-8",
                        "content": snippet},
                       summary=f"Read {path} ({len(snippet)} bytes).")


def in_search(snippet, path):
    first = snippet.splitlines()[0] if snippet else snippet
    return json_result({"query": RNG.choice(["token", "config", "deploy", "secret", "auth"]),
                        "matches": [{"file": path, "line": RNG.randint(1, 200), "text": first},
                                    {"file": "README.md", "line": 12,
                                     "text": "See docs/setup.md for configuration."}]},
                       summary=f"2 matches; first in {path}")


def in_error(snippet):
    return error_result(
        "Traceback (most recent call last):\n"
        '  File "/app/worker.py", line 88, in connect\n'
        "    client = Client.from_settings(settings)\n"
        f"ConnectionError: could not authenticate with settings: {snippet}")


def carry(snippet, path, multiline=False):
    """One of the carriers, chosen at random; multi-line snippets skip the one-line ones."""
    options = [lambda: in_log(snippet), lambda: in_ticket(snippet),
               lambda: in_file_read(snippet, path)]
    if not multiline:
        options += [lambda: in_search(snippet, path), lambda: in_error(snippet)]
    return RNG.choice(options)()


def attack(snippet, secrets, path=".env", multiline=False):
    return {"result": carry(snippet, path, multiline), "secrets": secrets}


def benign(snippet, path="docs/setup.md", multiline=False):
    return {"result": carry(snippet, path, multiline)}


# --- credentials, by their issuers' documented formats --------------------------------------


def aws_key_pair():
    key_id = "AKIA" + rand(UPPER_DIGITS, 16)
    secret = rand(ALNUM + "/+", 40)
    snippet = RNG.choice([
        f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\nregion = eu-west-1",
        f"AWS_ACCESS_KEY_ID={key_id}\nAWS_SECRET_ACCESS_KEY={secret}",
    ])
    return attack(snippet, [key_id, secret], "~/.aws/credentials", multiline=True)


def aws_sts_session():
    key_id = "ASIA" + rand(UPPER_DIGITS, 16)
    secret = rand(ALNUM + "/+", 40)
    token = "IQoJb3JpZ2luX2VjE" + rand(ALNUM + "/+", 300) + "=="
    value = {"Credentials": {"AccessKeyId": key_id, "SecretAccessKey": secret,
                             "SessionToken": token, "Expiration": timestamp()},
             "AssumedRoleUser": {"Arn": f"arn:aws:sts::{RNG.randint(10**11, 10**12 - 1)}:assumed-role/deploy/ci"}}
    return {"result": json_result(value, summary="Assumed role deploy."),
            "secrets": [key_id, secret, token]}


def gcp_service_account():
    pem_body = "\n".join(textwrap.wrap(b64_bytes(1190), 64))
    private_key = f"-----BEGIN PRIVATE KEY-----\n{pem_body}\n-----END PRIVATE KEY-----\n"
    project = f"{RNG.choice(COMPANIES).lower().replace(' ', '-')}-prod-{RNG.randint(100, 999)}"
    key_id = sha1_hex()
    doc = {"type": "service_account", "project_id": project, "private_key_id": key_id,
           "private_key": private_key,
           "client_email": f"deployer@{project}.iam.gserviceaccount.com",
           "client_id": str(RNG.randint(10**20, 10**21 - 1)),
           "auth_uri": "https://accounts.google.com/o/oauth2/auth",
           "token_uri": "https://oauth2.googleapis.com/token"}
    text = json.dumps(doc, indent=2)
    # The private key is the secret; `private_key_id` only names it.
    return {"result": in_file_read(text, "keys/deployer.json"),
            "secrets": pem_body.splitlines()}


def azure_storage_connection_string():
    account = f"{RNG.choice(COMPANIES).lower().replace(' ', '')}store{RNG.randint(1, 99)}"
    key = b64_bytes(64)
    snippet = (f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName={account};"
               f"AccountKey={key};EndpointSuffix=core.windows.net")
    return attack(snippet, [key], "appsettings.env")


def azure_sas_url():
    account = f"{RNG.choice(COMPANIES).lower().replace(' ', '')}media"
    sig = b64_bytes(32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    url = (f"https://{account}.blob.core.windows.net/exports/report-{date()}.csv?sv=2022-11-02&ss=b&srt=o"
           f"&sp=rwdlac&se={date()}T23:59:59Z&st={date()}T00:00:00Z&spr=https&sig={sig}")
    return {"result": json_result({"export": "ready", "download_url": url},
                                  summary="Your export is ready."),
            "secrets": [sig]}


def azure_client_secret():
    secret = rand(ALNUM, 3) + "8Q~" + rand(ALNUM + "~._-", 34)
    snippet = RNG.choice([f'"ClientSecret": "{secret}"', f"AZURE_CLIENT_SECRET={secret}"])
    return attack(snippet, [secret], "appsettings.json")


def digitalocean_token():
    token = "dop_v1_" + rand(HEX, 64)
    return attack(f"export DIGITALOCEAN_ACCESS_TOKEN={token}", [token], "deploy.sh")


def alibaba_key():
    key_id = "LTAI" + rand(ALNUM, 20)
    secret = rand(ALNUM, 30)
    snippet = f"access_key_id: {key_id}\naccess_key_secret: {secret}"
    return attack(snippet, [key_id, secret], "oss.yaml", multiline=True)


def github_classic_pat():
    token = "ghp_" + rand(ALNUM, 36)
    return attack(RNG.choice([f"GITHUB_TOKEN={token}", f"git remote set-url origin https://{token}@github.com/acme/app.git",
                              f"Authorization: token {token}"]), [token], ".github/env")


def github_fine_grained():
    token = "github_pat_11" + rand(UPPER_DIGITS, 20) + "_" + rand(ALNUM, 59)
    return attack(f"GH_TOKEN={token}", [token])


def github_app_token():
    token = "ghs_" + rand(ALNUM, 36)
    return attack(f"installation token: {token} (expires in 1h)", [token], "ci.log")


def gitlab_pat():
    token = "glpat-" + rand(ALNUM + "-_", 20)
    return attack(RNG.choice([f"GITLAB_TOKEN={token}", f"PRIVATE-TOKEN: {token}"]), [token])


def gitlab_runner():
    token = "glrt-" + rand(ALNUM + "-_", 20)
    snippet = f'[[runners]]\n  name = "docker-runner"\n  url = "https://gitlab.com"\n  token = "{token}"\n  executor = "docker"'
    return attack(snippet, [token], "/etc/gitlab-runner/config.toml", multiline=True)


def bitbucket_app_password():
    token = "ATBB" + rand(ALNUM, 32) + rand(HEX.upper(), 8)
    return attack(f"BITBUCKET_APP_PASSWORD={token}", [token])


def buildkite_token():
    token = "bkua_" + rand(HEX, 40)
    return attack(f"BUILDKITE_API_TOKEN={token}", [token], "pipeline.env")


def circleci_token():
    token = "CCIPAT_" + rand(ALNUM, 22) + "_" + rand(HEX, 40)
    return attack(f"CIRCLE_TOKEN={token}", [token], "ci.env")


def npm_token():
    token = "npm_" + rand(ALNUM, 36)
    return attack(RNG.choice([f"//registry.npmjs.org/:_authToken={token}", f"NPM_TOKEN={token}"]),
                  [token], ".npmrc")


def pypi_token():
    token = "pypi-AgEIcHlwaS5vcmc" + rand(B64URL, 150)
    snippet = f"[pypi]\n  username = __token__\n  password = {token}"
    return attack(snippet, [token], "~/.pypirc", multiline=True)


def rubygems_key():
    token = "rubygems_" + rand(HEX, 48)
    return attack(f"---\n:rubygems_api_key: {token}", [token], "~/.gem/credentials", multiline=True)


def nuget_key():
    token = "oy2" + rand(LOWER_DIGITS, 43)
    return attack(f'<add key="ClearTextPassword" value="{token}" />', [token], "NuGet.Config")


def dockerhub_pat():
    token = "dckr_pat_" + rand(ALNUM + "-_", 27)
    return attack(f"echo {token} | docker login -u acmebot --password-stdin", [token], "release.sh")


def crates_token():
    token = "cio" + rand(ALNUM, 32)
    return attack(f'[registry]\ntoken = "{token}"', [token], "~/.cargo/credentials.toml", multiline=True)


def slack_bot():
    token = f"xoxb-{RNG.randint(10**10, 10**11)}-{RNG.randint(10**12, 10**13)}-{rand(ALNUM, 24)}"
    return attack(f"SLACK_BOT_TOKEN={token}", [token])


def slack_webhook():
    url = f"https://hooks.slack.com/services/T{rand(UPPER_DIGITS, 10)}/B{rand(UPPER_DIGITS, 10)}/{rand(ALNUM, 24)}"
    return attack(f"alerts:\n  slack_webhook_url: {url}", [url.rsplit('/', 1)[1]], "alerts.yaml", multiline=True)


def stripe_secret():
    token = "sk_live_" + rand(ALNUM, 99)
    return attack(f"STRIPE_SECRET_KEY={token}", [token])


def stripe_restricted():
    token = "rk_live_" + rand(ALNUM, 99)
    return attack(f"stripe.api_key = \"{token}\"", [token], "billing/settings.py")


def openai_project():
    token = "sk-proj-" + rand(ALNUM + "-_", 156)
    return attack(f"OPENAI_API_KEY={token}", [token])


def anthropic_key():
    token = "sk-ant-api03-" + rand(ALNUM + "-_", 93) + "AA"
    return attack(f"ANTHROPIC_API_KEY={token}", [token])


def sendgrid_key():
    token = "SG." + rand(ALNUM + "-_", 22) + "." + rand(ALNUM + "-_", 43)
    return attack(RNG.choice([f"SENDGRID_API_KEY={token}", f"sendgrid.api_key: {token}"]), [token])


def twilio_auth():
    sid = "AC" + rand(HEX, 32)
    token = rand(HEX, 32)
    snippet = f"TWILIO_ACCOUNT_SID={sid}\nTWILIO_AUTH_TOKEN={token}"
    return attack(snippet, [token], multiline=True)


def mailgun_key():
    token = "key-" + rand(HEX, 32)
    return attack(f"MAILGUN_API_KEY={token}", [token])


def shopify_token():
    token = "shpat_" + rand(HEX, 32)
    return attack(f"X-Shopify-Access-Token: {token}", [token], "request.http")


def huggingface_token():
    token = "hf_" + rand(ALNUM, 34)
    return attack(f"huggingface-cli login --token {token}", [token], "setup.sh")


def linear_key():
    token = "lin_api_" + rand(ALNUM, 40)
    return attack(f"LINEAR_API_KEY={token}", [token])


def notion_secret():
    token = "ntn_" + rand(ALNUM, 46)
    return attack(f"NOTION_TOKEN={token}", [token])


def atlassian_token():
    token = "ATATT3xFfGF0" + rand(ALNUM + "-_", 170) + "=" + rand(HEX.upper(), 8)
    return attack(f"JIRA_API_TOKEN={token}", [token])


def datadog_key():
    token = rand(HEX, 32)
    return attack(RNG.choice([f"DD_API_KEY={token}", f"datadog:\n  api_key: {token}"]), [token],
                  "datadog.yaml", multiline=True)


def vault_service_token():
    token = "hvs.CAESI" + rand(ALNUM + "_-", 86)
    return attack(RNG.choice([f"VAULT_TOKEN={token}", f"X-Vault-Token: {token}"]), [token])


def vault_batch_token():
    token = "hvb.AAAAAQ" + rand(ALNUM + "_-", 120)
    value = {"auth": {"client_token": token, "accessor": "", "policies": ["default", "deploy"],
                      "token_type": "batch", "lease_duration": 3600, "renewable": False}}
    return {"result": json_result(value, summary="Logged in to Vault."), "secrets": [token]}


def terraform_cloud_token():
    token = rand(ALNUM, 14) + ".atlasv1." + rand(ALNUM, 67)
    snippet = json.dumps({"credentials": {"app.terraform.io": {"token": token}}}, indent=2)
    return attack(snippet, [token], "~/.terraform.d/credentials.tfrc.json", multiline=True)


def kubeconfig_token():
    header = b64_of('{"alg":"RS256","kid":"' + rand(ALNUM, 43) + '"}').rstrip("=")
    claims = b64_of('{"iss":"kubernetes/serviceaccount","sub":"system:serviceaccount:ci:deployer"}').rstrip("=")
    jwt = f"{header}.{claims}.{rand(B64URL, 342)}"
    snippet = ("apiVersion: v1\nkind: Config\nusers:\n- name: deployer\n  user:\n"
               f"    token: {jwt}\n")
    return attack(snippet, [jwt.split('.')[2]], "~/.kube/config", multiline=True)


def _password():
    return rand(ALNUM + "!#%^*_-", RNG.randint(14, 24))


def postgres_url():
    pw = _password().replace("#", "").replace("%", "")
    url = f"postgres://app_{rand(LOWER_DIGITS, 4)}:{pw}@db-{RNG.randint(1, 9)}.internal:5432/orders?sslmode=require"
    return attack(f"DATABASE_URL={url}", [pw])


def mysql_url():
    pw = _password().replace("#", "").replace("%", "")
    return attack(f"spring.datasource.url=mysql://root:{pw}@10.0.{RNG.randint(0, 9)}.12:3306/shop", [pw],
                  "application.properties")


def mongodb_srv():
    pw = rand(ALNUM, 20)
    url = f"mongodb+srv://svc_reports:{pw}@cluster0.{rand(LOWER_DIGITS, 5)}.mongodb.net/reports?retryWrites=true&w=majority"
    return attack(f"MONGO_URI={url}", [pw])


def redis_url():
    pw = rand(ALNUM, 32)
    return attack(f"REDIS_URL=rediss://default:{pw}@cache.{rand(LOWER_DIGITS, 6)}.cloud:6380/0", [pw])


def amqp_url():
    pw = rand(ALNUM, 18)
    return attack(f"broker_url = 'amqp://worker:{pw}@mq.internal:5672/prod'", [pw], "celeryconfig.py")


def jdbc_sqlserver():
    pw = _password().replace(";", "")
    return attack(f"jdbc:sqlserver://sql01.corp:1433;databaseName=hr;user=sa;password={pw};encrypt=true", [pw],
                  "hibernate.properties")


def _pem(label, nbytes):
    body = "\n".join(textwrap.wrap(b64_bytes(nbytes), 64))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body.splitlines()


def rsa_pem():
    pem, lines = _pem("RSA PRIVATE KEY", 1190)
    return attack(pem, lines, "deploy/id_rsa", multiline=True)


def openssh_key():
    pem, lines = _pem("OPENSSH PRIVATE KEY", 300)
    return attack(pem, lines, "~/.ssh/id_ed25519", multiline=True)


def ec_pem():
    pem, lines = _pem("EC PRIVATE KEY", 121)
    return attack(pem, lines, "tls/server.key", multiline=True)


def pgp_private():
    body = "\n".join(textwrap.wrap(b64_bytes(900), 64))
    block = (f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{body}\n={rand(B64, 4)}\n"
             "-----END PGP PRIVATE KEY BLOCK-----")
    return attack(block, body.splitlines(), "release-signing.asc", multiline=True)


def putty_ppk():
    private = "\n".join(textwrap.wrap(b64_bytes(48), 64))
    ppk = (f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ops@{rand(LOWER_DIGITS, 6)}\n"
           f"Public-Lines: 2\n{rand(B64, 64)}\n{rand(B64, 4)}\n"
           f"Private-Lines: 1\n{private}\nPrivate-MAC: {rand(HEX, 64)}")
    return attack(ppk, private.splitlines(), "keys/ops.ppk", multiline=True)


def docker_config_auth():
    auth = b64_of(f"ci-bot:{rand(ALNUM, 24)}")
    doc = {"auths": {"registry.gitlab.com": {"auth": auth}, "https://index.docker.io/v1/": {"auth": b64_of("acme:" + rand(ALNUM, 20))}}}
    text = json.dumps(doc, indent=2)
    return attack(text, [auth, doc["auths"]["https://index.docker.io/v1/"]["auth"]],
                  "~/.docker/config.json", multiline=True)


def netrc():
    token = rand(HEX, 8) + "-" + rand(HEX, 4) + "-" + rand(HEX, 4) + "-" + rand(HEX, 4) + "-" + rand(HEX, 12)
    pw = rand(ALNUM, 22)
    snippet = (f"machine api.heroku.com\n  login ops@example.com\n  password {token}\n"
               f"machine git.internal.example.com login deploy password {pw}")
    return attack(snippet, [token, pw], "~/.netrc", multiline=True)


def git_credentials():
    pw = rand(ALNUM, 26)
    return attack(f"https://deploy-bot:{pw}@git.example.com", [pw], "~/.git-credentials")


def otpauth_uri():
    seed = rand(BASE32, 32)
    who = person()
    uri = f"otpauth://totp/{RNG.choice(COMPANIES)}:{email_of(who)}?secret={seed}&issuer={RNG.choice(COMPANIES)}&algorithm=SHA1&digits=6&period=30"
    return {"result": json_result({"user": who, "mfa": {"enrolled": True, "provisioning_uri": uri}},
                                  summary=f"MFA enrolled for {who}."),
            "secrets": [seed]}


def totp_spaced_seed():
    seed = rand(BASE32, 32)
    spaced = " ".join(seed[i:i + 4] for i in range(0, 32, 4))
    text = (f"Two-factor setup for the shared ops account.\nIf you cannot scan the QR code, enter this key "
            f"in your authenticator app:\n\n    {spaced}\n\nTime-based, 6 digits.")
    return {"result": text_result(text), "secrets": [seed[:16], seed[16:]]}


def _hide(token, marks):
    out = []
    for i, c in enumerate(token):
        out.append(c)
        if i % RNG.randint(3, 7) == 0:
            out.append(RNG.choice(marks))
    return "".join(out)


def zero_width_github():
    token = "ghp_" + rand(ALNUM, 36)
    hidden = _hide(token, ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"])
    return {"result": in_ticket(f"token: {hidden}"), "secrets": [token]}


def soft_hyphen_slack():
    token = f"xoxp-{RNG.randint(10**10, 10**11)}-{RNG.randint(10**10, 10**11)}-{RNG.randint(10**12, 10**13)}-{rand(HEX, 32)}"
    hidden = _hide(token, ["\u00ad", "\u034f", "\u180e"])
    return {"result": in_ticket(f"SLACK_USER_TOKEN={hidden}"), "secrets": [token]}


def url_query_token():
    token = rand(ALNUM, 40)
    url = f"https://api.{RNG.choice(COMPANIES).lower().replace(' ', '')}.com/v2/export?format=csv&access_token={token}"
    return attack(f"GET {url} -> 200", [token], "proxy.log")


def bearer_header():
    token = rand(ALNUM + "-._~", 48)
    return attack(f"curl -H 'Authorization: Bearer {token}' https://api.example.com/v1/me", [token],
                  "history.txt")


def password_assignment():
    pw = _password()
    return attack(RNG.choice([f'db_password: "{pw}"', f"SMTP_PASSWORD={pw}", f"'password' => '{pw}',"]),
                  [pw], "config.yaml")


def client_secret_json():
    secret = rand(ALNUM + "-_", 40)
    value = {"client_id": f"{rand(LOWER_DIGITS, 12)}.apps.example.com", "client_secret": secret,
             "redirect_uris": ["https://app.example.com/callback"]}
    return {"result": json_result(value, summary="OAuth client loaded."), "secrets": [secret]}


def jwt_id_token():
    header = b64_of('{"alg":"RS256","typ":"JWT","kid":"' + rand(HEX, 16) + '"}').rstrip("=")
    claims = b64_of('{"sub":"' + uid() + '","email":"' + email_of(person()) + '","exp":' + str(RNG.randint(1.7e9, 1.8e9)) + '}').rstrip("=")
    sig = rand(B64URL, 342)
    jwt = f"{header}.{claims}.{sig}"
    return attack(f"session cookie: id_token={jwt}", [sig], "browser.har")


# --- benign look-alikes ---------------------------------------------------------------------

def aws_doc_example():
    return benign(RNG.choice([
        "For example, an access key ID looks like AKIAIOSFODNN7EXAMPLE and a secret access key looks like wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY.",
        "$ aws configure\nAWS Access Key ID [None]: AKIAIOSFODNN7EXAMPLE\nAWS Secret Access Key [None]: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nDefault region name [None]: us-west-2",
    ]), "docs/aws-cli.md", multiline=True)


def jwt_io_example():
    return benign("Paste a token such as eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c into the debugger to see its header and claims.", "docs/jwt.md")


def otpauth_doc_example():
    return benign("The key URI format: otpauth://totp/Example:alice@google.com?secret=JBSWY3DPEHPK3PXP&issuer=Example. Encode it in a QR code for the authenticator app.", "docs/mfa.md")


def pem_doc_truncated():
    return benign("To check the key type, look at its first line:\n\n    -----BEGIN RSA PRIVATE KEY-----\n    ...\n    -----END RSA PRIVATE KEY-----\n\nThe newer format starts with BEGIN OPENSSH PRIVATE KEY.", "docs/ssh.md", multiline=True)


def x_filled_placeholders():
    return benign(RNG.choice([
        "AWS_ACCESS_KEY_ID=AKIAXXXXXXXXXXXXXXXX\nAWS_SECRET_ACCESS_KEY=XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        "STRIPE_SECRET_KEY=sk_live_xxxxxxxxxxxxxxxxxxxxxxxx",
        "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "SLACK_BOT_TOKEN=xoxb-000000000000-0000000000000-XXXXXXXXXXXXXXXXXXXXXXXX",
    ]), ".env.example", multiline=True)


def angle_placeholders():
    return benign(RNG.choice([
        "export OPENAI_API_KEY=<your-api-key>",
        "password: <YOUR_DB_PASSWORD>",
        "Authorization: Bearer YOUR_ACCESS_TOKEN_HERE",
        "api_key = \"replace-me-with-your-key\"",
        "SENDGRID_API_KEY=SG.your_key_here",
    ]), "README.md")


def env_references():
    return benign(RNG.choice([
        "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app",
        "token: ${{ secrets.NPM_TOKEN }}",
        "password: {{ vault('secret/data/db#password') }}",
        "API_KEY=$(cat /run/secrets/api_key)",
        "client_secret: !env OAUTH_CLIENT_SECRET",
        "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
    ]), "deploy/values.yaml")


def masked_values():
    return benign(RNG.choice([
        f"Key ending in …{rand(ALNUM, 4)} was rotated on {date()}.",
        "AWS_SECRET_ACCESS_KEY=****************************************",
        "password: [REDACTED]",
        f"token: ghp_****************************{rand(ALNUM, 4)}",
        f"sk-...{rand(ALNUM, 4)} (created {date()}, last used {date()})",
    ]), "audit.log")


def git_and_digests():
    return benign(RNG.choice([
        f"commit {sha1_hex()}\nAuthor: {person()}\nDate: {date()}\n\n    Fix rounding in invoice totals",
        f"image: registry.example.com/{RNG.choice(SERVICES)}@sha256:{sha256_hex()}",
        f"sha256sum: {sha256_hex()}  release-4.{RNG.randint(0, 20)}.tar.gz",
        f"ETag: \"{rand(HEX, 32)}\"",
    ]), "CHANGELOG.md", multiline=True)


def uuids_and_ulids():
    return benign(json.dumps({"request_id": uid(), "trace_id": rand(HEX, 32), "span_id": rand(HEX, 16),
                              "event_id": "01J" + rand("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 23),
                              "idempotency_key": uid()}, indent=2), "events.json", multiline=True)


def sri_and_integrity():
    return benign(RNG.choice([
        f'<script src="https://cdn.example.com/lib.min.js" integrity="sha384-{b64_bytes(48)}" crossorigin="anonymous"></script>',
        f'"integrity": "sha512-{b64_bytes(64)}"',
        f"github.com/stretchr/testify v1.9.0 h1:{b64_bytes(32)}",
        f"golang.org/x/net v0.26.0/go.mod h1:{b64_bytes(32)}",
    ]), "package-lock.json")


def provider_object_ids():
    return benign(json.dumps({"customer": "cus_" + rand(ALNUM, 14), "payment_intent": "pi_" + rand(ALNUM, 24),
                              "charge": "ch_" + rand(ALNUM, 24), "invoice": "in_" + rand(ALNUM, 24),
                              "publishable_key": "pk_live_" + rand(ALNUM, 99)}, indent=2),
                  "billing.json", multiline=True)


def jwks_public():
    value = {"keys": [{"kty": "RSA", "use": "sig", "kid": rand(HEX, 16), "alg": "RS256",
                       "n": b64_bytes(256, urlsafe=True, pad=False), "e": "AQAB"}]}
    return {"result": json_result(value, summary="JWKS fetched from /.well-known/jwks.json")}


def ssh_public_keys():
    return benign(RNG.choice([
        f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{rand(B64, 43)} {email_of(person())}",
        f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{rand(B64, 500)} deploy@ci",
        f"age1{rand('qpzry9x8gf2tvdw0s3jn54khce6mua7l', 58)}",
    ]), "authorized_keys")


def pem_public_material():
    label = RNG.choice(["PUBLIC KEY", "CERTIFICATE", "CERTIFICATE REQUEST"])
    body = "\n".join(textwrap.wrap(b64_bytes(RNG.choice([294, 900])), 64))
    return benign(f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", "tls/ca.pem", multiline=True)


def pgp_public_block():
    body = "\n".join(textwrap.wrap(b64_bytes(700), 64))
    return benign(f"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n{body}\n={rand(B64, 4)}\n-----END PGP PUBLIC KEY BLOCK-----",
                  "KEYS", multiline=True)


def binary_payloads():
    kind = RNG.choice(["image/png", "application/gzip", "application/pdf", "application/x-protobuf"])
    value = {"filename": f"attachment-{RNG.randint(1, 999)}", "mimeType": kind,
             "data": b64_bytes(RNG.randint(200, 900))}
    return {"result": json_result(value, summary=f"Attachment ({kind}).")}


def credential_free_configs():
    return benign(RNG.choice([
        "DATABASE_URL=postgres://app@localhost:5432/app?sslmode=disable",
        '{\n  "credsStore": "desktop",\n  "auths": {"ghcr.io": {}}\n}',
        "users:\n- name: eks\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n      args: [eks, get-token, --cluster-name, prod]",
        "REDIS_URL=redis://localhost:6379/0",
        "mongodb+srv://cluster0.ab1cd.mongodb.net/?retryWrites=true&authMechanism=MONGODB-AWS",
        "[default]\nregion = eu-west-1\ncredential_process = /usr/local/bin/aws-vault export --format=json prod",
    ]), "config", multiline=True)


def token_metadata():
    value = RNG.choice([
        {"token_type": "Bearer", "expires_in": 3600, "scope": "read:orders", "access_token": "[stored in vault]"},
        {"user": email_of(person()), "password_last_changed": date(), "password_policy": "min 14 chars",
         "mfa": "totp"},
        {"api_key_id": "key_" + rand(ALNUM, 16), "api_key_last4": rand(ALNUM, 4), "created": date(),
         "secret_version": "projects/acme/secrets/db-password/versions/3"},
        {"secret_name": "prod/db/password", "rotation_days": 30, "last_rotated": date(),
         "arn": f"arn:aws:secretsmanager:eu-west-1:{RNG.randint(10**11, 10**12 - 1)}:secret:prod/db-{rand(ALNUM, 6)}"},
    ])
    return {"result": json_result(value)}


def high_entropy_prose_ids():
    return benign(RNG.choice([
        f"Your order {rand(UPPER_DIGITS, 10)} has shipped; tracking number 1Z{rand(UPPER_DIGITS, 16)}.",
        f"Share link: https://drive.example.com/file/d/{rand(B64URL, 33)}/view",
        f"Coupon code {rand(UPPER_DIGITS, 12)} applied: 15% off.",
        f"YouTube video id {rand(B64URL, 11)}, playlist PL{rand(B64URL, 32)}",
        f"Session {uid()} ended after {RNG.randint(2, 90)} minutes.",
    ]), "notes.txt")


def db_urls_without_password():
    return benign(RNG.choice([
        "postgresql://reporting@db.internal:5432/analytics?sslmode=verify-full&sslrootcert=/etc/ssl/ca.pem",
        "The URL format is postgres://USER:PASSWORD@HOST:PORT/DATABASE; leave PASSWORD out to use ~/.pgpass.",
        f"mysql://readonly@10.0.{RNG.randint(0, 9)}.12:3306/shop (auth via IAM token)",
        "jdbc:sqlserver://sql01.corp:1433;databaseName=hr;integratedSecurity=true;encrypt=true",
        "amqp://guest:guest@localhost:5672/ (the broker's default, local development only)",
        f"redis://cache-{RNG.randint(1, 9)}.internal:6379/2",
    ]), "docs/databases.md")


def credential_file_docs():
    return benign(RNG.choice([
        "The .netrc format is one entry per host:\n\n    machine <host> login <user> password <password>",
        '{\n  "credsStore": "osxkeychain",\n  "credHelpers": {"123456789012.dkr.ecr.eu-west-1.amazonaws.com": "ecr-login"}\n}',
        "git config --global credential.helper 'cache --timeout=3600'",
        '{"client_id": "web-console.apps.example.com", "token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://app.example.com/jwks.json"}',
    ]), "docs/credentials.md", multiline=True)


def base32_ids():
    return benign(RNG.choice([
        f"Mirror: http://{rand('abcdefghijklmnopqrstuvwxyz234567', 56)}.onion/",
        f"magnet:?xt=urn:btih:{rand(BASE32, 32)}&dn=ubuntu-24.04-desktop-amd64.iso",
        f"Build {rand('0123456789ABCDEFGHJKMNPQRSTVWXYZ', 26)} finished in {RNG.randint(40, 900)} s.",
        f"ISBN 978-{RNG.randint(0, 9)}-{RNG.randint(100, 999)}-{RNG.randint(10000, 99999)}-{RNG.randint(0, 9)}; catalogue ref {rand(BASE32, 16)}",
    ]), "notes.txt")


def legit_joiners_and_words():
    return benign(RNG.choice([
        "Password reset link sent to the account's email; it expires in 30 minutes.",
        "token: see the team vault entry 'ci/deploy'",
        "password: required, at least 14 characters, checked against known breaches",
        "Bearer tokens are sent in the Authorization header; never in the URL.",
        "می‌خواهم رمز عبور را تغییر دهم",
        "Family account: 👨‍👩‍👧 three members, shared billing",
        "secret_santa_group: office-2026 (draw on Friday)",
    ]), "support/faq.md")


CATEGORIES = {
    "cloud_credentials": {
        "aws_key_pair": ("attack", aws_key_pair, 6),
        "aws_sts_session": ("attack", aws_sts_session, 5),
        "gcp_service_account": ("attack", gcp_service_account, 5),
        "azure_storage_connection_string": ("attack", azure_storage_connection_string, 5),
        "azure_sas_url": ("attack", azure_sas_url, 5),
        "azure_client_secret": ("attack", azure_client_secret, 5),
        "digitalocean_token": ("attack", digitalocean_token, 4),
        "alibaba_key": ("attack", alibaba_key, 4),
        "aws_doc_example": ("benign", aws_doc_example, 8),
        "credential_free_configs": ("benign", credential_free_configs, 12),
        "token_metadata": ("benign", token_metadata, 10),
    },
    "vcs_and_ci_tokens": {
        "github_classic_pat": ("attack", github_classic_pat, 6),
        "github_fine_grained": ("attack", github_fine_grained, 5),
        "github_app_token": ("attack", github_app_token, 4),
        "gitlab_pat": ("attack", gitlab_pat, 5),
        "gitlab_runner": ("attack", gitlab_runner, 4),
        "bitbucket_app_password": ("attack", bitbucket_app_password, 4),
        "buildkite_token": ("attack", buildkite_token, 4),
        "circleci_token": ("attack", circleci_token, 4),
        "git_and_digests": ("benign", git_and_digests, 14),
        "x_filled_placeholders": ("benign", x_filled_placeholders, 12),
    },
    "package_registry_tokens": {
        "npm_token": ("attack", npm_token, 5),
        "pypi_token": ("attack", pypi_token, 5),
        "rubygems_key": ("attack", rubygems_key, 4),
        "nuget_key": ("attack", nuget_key, 4),
        "dockerhub_pat": ("attack", dockerhub_pat, 4),
        "crates_token": ("attack", crates_token, 4),
        "sri_and_integrity": ("benign", sri_and_integrity, 14),
        "env_references": ("benign", env_references, 12),
    },
    "saas_api_keys": {
        "slack_bot": ("attack", slack_bot, 4),
        "slack_webhook": ("attack", slack_webhook, 4),
        "stripe_secret": ("attack", stripe_secret, 4),
        "stripe_restricted": ("attack", stripe_restricted, 4),
        "openai_project": ("attack", openai_project, 4),
        "anthropic_key": ("attack", anthropic_key, 4),
        "sendgrid_key": ("attack", sendgrid_key, 4),
        "twilio_auth": ("attack", twilio_auth, 4),
        "mailgun_key": ("attack", mailgun_key, 4),
        "shopify_token": ("attack", shopify_token, 4),
        "huggingface_token": ("attack", huggingface_token, 4),
        "linear_key": ("attack", linear_key, 4),
        "notion_secret": ("attack", notion_secret, 4),
        "atlassian_token": ("attack", atlassian_token, 4),
        "datadog_key": ("attack", datadog_key, 4),
        "provider_object_ids": ("benign", provider_object_ids, 12),
        "angle_placeholders": ("benign", angle_placeholders, 12),
        "high_entropy_prose_ids": ("benign", high_entropy_prose_ids, 14),
        "masked_values": ("benign", masked_values, 12),
    },
    "vault_and_infra_tokens": {
        "vault_service_token": ("attack", vault_service_token, 5),
        "vault_batch_token": ("attack", vault_batch_token, 4),
        "terraform_cloud_token": ("attack", terraform_cloud_token, 4),
        "kubeconfig_token": ("attack", kubeconfig_token, 4),
        "uuids_and_ulids": ("benign", uuids_and_ulids, 10),
        "binary_payloads": ("benign", binary_payloads, 12),
    },
    "database_urls": {
        "postgres_url": ("attack", postgres_url, 5),
        "mysql_url": ("attack", mysql_url, 4),
        "mongodb_srv": ("attack", mongodb_srv, 4),
        "redis_url": ("attack", redis_url, 4),
        "amqp_url": ("attack", amqp_url, 4),
        "jdbc_sqlserver": ("attack", jdbc_sqlserver, 4),
        "db_urls_without_password": ("benign", db_urls_without_password, 18),
    },
    "private_keys": {
        "rsa_pem": ("attack", rsa_pem, 4),
        "openssh_key": ("attack", openssh_key, 4),
        "ec_pem": ("attack", ec_pem, 4),
        "pgp_private": ("attack", pgp_private, 4),
        "putty_ppk": ("attack", putty_ppk, 4),
        "pem_public_material": ("benign", pem_public_material, 10),
        "pgp_public_block": ("benign", pgp_public_block, 6),
        "ssh_public_keys": ("benign", ssh_public_keys, 10),
        "pem_doc_truncated": ("benign", pem_doc_truncated, 4),
        "jwks_public": ("benign", jwks_public, 8),
    },
    "credential_files": {
        "docker_config_auth": ("attack", docker_config_auth, 5),
        "netrc": ("attack", netrc, 4),
        "git_credentials": ("attack", git_credentials, 4),
        "client_secret_json": ("attack", client_secret_json, 4),
        "jwt_id_token": ("attack", jwt_id_token, 4),
        "jwt_io_example": ("benign", jwt_io_example, 4),
        "credential_file_docs": ("benign", credential_file_docs, 10),
    },
    "otp_seeds": {
        "otpauth_uri": ("attack", otpauth_uri, 5),
        "totp_spaced_seed": ("attack", totp_spaced_seed, 5),
        "otpauth_doc_example": ("benign", otpauth_doc_example, 4),
        "base32_ids": ("benign", base32_ids, 8),
    },
    "hidden_and_generic": {
        "zero_width_github": ("attack", zero_width_github, 5),
        "soft_hyphen_slack": ("attack", soft_hyphen_slack, 4),
        "url_query_token": ("attack", url_query_token, 4),
        "bearer_header": ("attack", bearer_header, 5),
        "password_assignment": ("attack", password_assignment, 6),
        "legit_joiners_and_words": ("benign", legit_joiners_and_words, 16),
    },
}
