"""Distractor notes for the retrieval evaluation: what a real store holds besides the facts a query needs.

``notes(count, seed, reserved)`` returns ``count`` import-jsonl lines (dicts with
content, source, type, key, scope, tags) about many made-up projects, plus, for
about one in ten, how the note is later retired (``Note.retire``: a supersede
with new content, or a forget, deprecate or expire without a successor).

They are generated from a small grammar rather than one template:

- every project has a domain (logistics, games, clinics, ...) with its own
  nouns, a technology stack with its own commands and tools, components, people,
  a datastore, a CI and a deployment target, and a team language: most teams
  write English, some Korean, some Japanese, and those mix in English terms;
- a note is one of sixteen kinds (command, decision, convention, architecture,
  runbook, warning, owner, config, dependency pin, API behaviour, performance
  budget, user preference, dated event, known bug, glossary entry, onboarding
  tip), each with several phrasings in different styles (a full sentence, a
  terse ``key: value`` line, a bullet, an ADR-style decision, a question and its
  answer, a two- or three-sentence architecture note), in English, Korean or
  Japanese;
- a few notes have no project at all (the user's machine and habits);
- about a third carry a key.

Distractors must never state a case fact: project names come from their own
pools (never a name in ``reserved``), and a note that contains any reserved
term (the case projects' names and the identifiers, commands, paths and people
of their facts, which the evaluation passes in) is thrown away and drawn again.
Common software words (test, deploy, Postgres, CI, pytest, ...) are shared on
purpose: that is what makes them distractors.

Generation is pure Python and deterministic for a seed: 100,000 notes take a
couple of seconds.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from typing import Any

# ---------------------------------------------------------------- vocabulary

_NAME_LEFT = (
    "amber ash birch bramble cinder clover copper coral crane cobalt dune ember fable fern flint frost gale garnet "
    "glade granite harbor hazel heron indigo iron jasper juniper kelp lark lumen maple meadow mica moss nectar "
    "north nova oak onyx otter pine plume prairie quill raven reed river rowan rust saffron sage slate sorrel "
    "spruce storm sumac thistle tidal timber topaz umber vale velvet willow wren yarrow zinc"
).split()
_NAME_RIGHT = (
    "bay beam bell bird boat book bridge brook cart cask cove crest deck dock field finch fire fjord forge fox "
    "gate glen grove hall hawk hive hollow horn keep kite lake lamp lane leaf ledger loft loom mill mint moth "
    "nest peak pier pond post reef ridge roost row sail shed shore spire spring stack stone tide tower track "
    "trail vault well wharf wing works yard"
).split()
_SYLLABLES = (
    "ka ri mo zen tu vel lo ra fin dra sol ne bo cas tor vi qua len mir oz pax rel sy tan ul wex yo zar".split()
)

DOMAINS: dict[str, dict[str, list[str]]] = {
    "logistics": {
        "en": "shipment parcel carrier route depot waybill pallet dock consignment courier".split(),
        "ko": "배송 택배 운송장 경로 물류센터 기사 출고 입고".split(),
        "ja": "配送 荷物 倉庫 集荷 出荷 伝票 配達員 ルート".split(),
    },
    "telemetry": {
        "en": "sensor reading device firmware sample probe beacon threshold heartbeat gauge".split(),
        "ko": "센서 측정값 장치 펌웨어 임계값 수집기".split(),
        "ja": "センサー 計測値 端末 ファームウェア 閾値 収集".split(),
    },
    "retail": {
        "en": "cart coupon catalog sku wishlist basket voucher storefront inventory promotion".split(),
        "ko": "장바구니 쿠폰 상품 재고 기획전 주문서".split(),
        "ja": "カート クーポン 商品 在庫 セール 注文".split(),
    },
    "clinics": {
        "en": "appointment clinic practitioner slot referral patient waitlist reminder roster shift".split(),
        "ko": "예약 진료 환자 의사 대기열 알림".split(),
        "ja": "予約 診療 患者 医師 待ち行列 通知".split(),
    },
    "games": {
        "en": "match lobby leaderboard player matchmaking replay loot season guild tick".split(),
        "ko": "매치 로비 랭킹 플레이어 시즌 길드 보상".split(),
        "ja": "対戦 ロビー ランキング プレイヤー シーズン ギルド 報酬".split(),
    },
    "media": {
        "en": "playlist episode transcode thumbnail subtitle stream rendition caption podcast chapter".split(),
        "ko": "재생목록 에피소드 자막 썸네일 인코딩 스트림".split(),
        "ja": "再生リスト エピソード 字幕 サムネイル 変換 配信".split(),
    },
    "people": {
        "en": "employee timesheet leave onboarding contract department headcount badge roster".split(),
        "ko": "직원 근태 휴가 입사 부서 조직도".split(),
        "ja": "従業員 勤怠 休暇 入社 部署 組織図".split(),
    },
    "learning": {
        "en": "course lesson quiz enrollment grade classroom assignment rubric cohort syllabus".split(),
        "ko": "강의 수업 퀴즈 수강생 과제 성적".split(),
        "ja": "講座 授業 小テスト 受講者 課題 成績".split(),
    },
    "housing": {
        "en": "listing viewing tenant lease landlord property valuation floorplan deposit".split(),
        "ko": "매물 임대 계약 세입자 시세 평면도".split(),
        "ja": "物件 賃貸 契約 入居者 相場 間取り".split(),
    },
    "ml": {
        "en": "dataset feature embedding checkpoint label experiment inference shard sample annotation".split(),
        "ko": "데이터셋 피처 임베딩 체크포인트 라벨 실험 추론".split(),
        "ja": "データセット 特徴量 埋め込み チェックポイント ラベル 実験 推論".split(),
    },
    "ads": {
        "en": "campaign impression bid creative advertiser auction pacing audience placement".split(),
        "ko": "캠페인 노출 입찰 광고주 소재 타겟".split(),
        "ja": "キャンペーン 表示回数 入札 広告主 クリエイティブ 配信面".split(),
    },
    "smarthome": {
        "en": "thermostat scene automation hub pairing routine appliance schedule room".split(),
        "ko": "온도조절기 장면 자동화 허브 페어링 가전".split(),
        "ja": "サーモスタット シーン 自動化 ハブ ペアリング 家電".split(),
    },
    "travel": {
        "en": "booking itinerary fare hotel seatmap traveler layover fareclass trip".split(),
        "ko": "예약 여정 운임 호텔 좌석 여행자".split(),
        "ja": "予約 旅程 運賃 ホテル 座席 旅行者".split(),
    },
    "publishing": {
        "en": "article author draft revision slug newsletter byline embargo feed".split(),
        "ko": "기사 작성자 초안 개정 뉴스레터 피드".split(),
        "ja": "記事 著者 下書き 改訂 ニュースレター フィード".split(),
    },
    "fleet": {
        "en": "vehicle trip odometer fuelcard maintenance telematics depot driver geofence".split(),
        "ko": "차량 운행 주행거리 정비 관제 지오펜스".split(),
        "ja": "車両 運行 走行距離 整備 テレマティクス ジオフェンス".split(),
    },
    "dining": {
        "en": "reservation table menu ticket kitchen delivery tip floorplan waitlist".split(),
        "ko": "예약 테이블 메뉴 주방 배달 대기".split(),
        "ja": "予約 テーブル メニュー 厨房 デリバリー 順番待ち".split(),
    },
}

STACKS: dict[str, dict[str, list[str]]] = {
    "django": {
        "lang": ["Python"],
        "test": ["python manage.py test --parallel", "pytest -q -p no:cacheprovider", "tox -e py312"],
        "lint": ["flake8 src", "pylint app", "ruff check app"],
        "fmt": ["black", "ruff format", "autopep8"],
        "run": ["python manage.py runserver 0.0.0.0:{port}", "honcho start", "make dev"],
        "build": ["docker build -t {project}-web .", "make image"],
        "pkg": ["poetry", "pip-tools", "pdm", "hatch"],
        "lib": ["django-ninja", "celery", "drf-spectacular", "django-filter", "psycopg2", "gunicorn", "whitenoise"],
        "ext": ["py"],
        "dirs": ["app", "src", "apps"],
    },
    "fastapi": {
        "lang": ["Python"],
        "test": ["pytest -x -q", "pytest -m 'not e2e'", "nox -s tests"],
        "lint": ["ruff check .", "mypy app", "pyright"],
        "fmt": ["black", "ruff format"],
        "run": ["uvicorn app.main:app --reload --port {port}", "make run"],
        "build": ["docker build -f deploy/Dockerfile .", "make build"],
        "pkg": ["poetry", "pdm", "pip-tools"],
        "lib": ["sqlalchemy", "pydantic", "httpx", "alembic", "structlog", "tenacity", "orjson"],
        "ext": ["py"],
        "dirs": ["app", "src", "service"],
    },
    "node": {
        "lang": ["TypeScript", "JavaScript"],
        "test": ["npm test", "pnpm vitest run", "yarn jest --ci", "npx mocha"],
        "lint": ["eslint . --max-warnings 0", "tsc --noEmit", "biome check"],
        "fmt": ["prettier", "biome format"],
        "run": ["npm run dev", "pnpm dev --port {port}", "node dist/server.js"],
        "build": ["npm run build", "pnpm build", "tsup src/index.ts"],
        "pkg": ["npm", "pnpm", "yarn"],
        "lib": ["express", "fastify", "nestjs", "prisma", "zod", "bullmq", "pino", "knex", "typeorm"],
        "ext": ["ts", "js"],
        "dirs": ["src", "lib", "server"],
    },
    "react": {
        "lang": ["TypeScript"],
        "test": ["pnpm test", "npm run test:unit", "yarn vitest", "npx cypress run"],
        "lint": ["eslint src", "tsc -b", "stylelint '**/*.css'"],
        "fmt": ["prettier"],
        "run": ["pnpm dev", "npm start", "yarn dev --host"],
        "build": ["pnpm build", "npm run build"],
        "pkg": ["pnpm", "npm", "yarn"],
        "lib": ["react-query", "redux-toolkit", "tailwind", "storybook", "react-hook-form", "msw", "next"],
        "ext": ["tsx", "ts"],
        "dirs": ["src", "app", "web"],
    },
    "go": {
        "lang": ["Go"],
        "test": ["go test ./... -count=1", "make test", "gotestsum --format testname"],
        "lint": ["golangci-lint run", "staticcheck ./...", "go vet ./..."],
        "fmt": ["gofmt", "goimports", "gofumpt"],
        "run": ["go run ./cmd/{project}", "make run", "air"],
        "build": ["go build -o bin/{project} ./cmd/{project}", "goreleaser build --snapshot"],
        "pkg": ["go modules"],
        "lib": ["chi", "gin", "sqlc", "pgx", "zap", "cobra", "viper", "grpc-go", "ent"],
        "ext": ["go"],
        "dirs": ["internal", "pkg", "cmd"],
    },
    "rust": {
        "lang": ["Rust"],
        "test": ["cargo test --workspace", "cargo test -- --test-threads=1", "make check"],
        "lint": ["cargo clippy -- -W clippy::pedantic", "cargo deny check", "cargo fmt --check"],
        "fmt": ["rustfmt"],
        "run": ["cargo run --release", "cargo watch -x run"],
        "build": ["cargo build --release", "cross build --target aarch64-unknown-linux-gnu"],
        "pkg": ["cargo"],
        "lib": ["tokio", "actix-web", "serde", "diesel", "sea-orm", "tonic", "tracing", "reqwest", "rayon"],
        "ext": ["rs"],
        "dirs": ["src", "crates"],
    },
    "spring": {
        "lang": ["Java", "Kotlin"],
        "test": ["./gradlew test", "mvn -q verify", "./mvnw test -Pintegration"],
        "lint": ["./gradlew ktlintCheck", "mvn checkstyle:check", "./gradlew detekt"],
        "fmt": ["spotless", "google-java-format", "ktlint"],
        "run": ["./gradlew bootRun", "mvn spring-boot:run"],
        "build": ["./gradlew bootJar", "mvn -DskipTests package"],
        "pkg": ["Gradle", "Maven"],
        "lib": ["spring-boot", "hibernate", "flyway", "liquibase", "jackson", "resilience4j", "mapstruct"],
        "ext": ["java", "kt"],
        "dirs": ["src/main/java", "src/main/kotlin"],
    },
    "rails": {
        "lang": ["Ruby"],
        "test": ["bundle exec rspec", "bin/rails test", "bundle exec rake spec"],
        "lint": ["bundle exec rubocop", "bundle exec brakeman"],
        "fmt": ["rubocop -a", "standardrb --fix"],
        "run": ["bin/dev", "bundle exec rails s -p {port}", "foreman start"],
        "build": ["bin/rails assets:precompile", "docker build ."],
        "pkg": ["bundler"],
        "lib": ["sidekiq", "devise", "pundit", "pg", "hotwire", "rspec", "shrine", "good_job"],
        "ext": ["rb"],
        "dirs": ["app", "lib"],
    },
    "elixir": {
        "lang": ["Elixir"],
        "test": ["mix test", "mix test --cover", "mix test --only integration"],
        "lint": ["mix credo --strict", "mix dialyzer"],
        "fmt": ["mix format"],
        "run": ["iex -S mix phx.server", "mix phx.server"],
        "build": ["MIX_ENV=prod mix release"],
        "pkg": ["hex"],
        "lib": ["phoenix", "ecto", "oban", "broadway", "absinthe", "tesla"],
        "ext": ["ex", "exs"],
        "dirs": ["lib", "apps"],
    },
    "dotnet": {
        "lang": ["C#"],
        "test": ["dotnet test", "dotnet test --filter Category!=Slow"],
        "lint": ["dotnet format --verify-no-changes", "dotnet build -warnaserror"],
        "fmt": ["dotnet format", "csharpier"],
        "run": ["dotnet run --project src/Api", "dotnet watch"],
        "build": ["dotnet publish -c Release"],
        "pkg": ["NuGet"],
        "lib": ["EntityFramework", "MediatR", "Serilog", "Polly", "Hangfire", "AutoMapper", "Dapper"],
        "ext": ["cs"],
        "dirs": ["src", "tests"],
    },
    "laravel": {
        "lang": ["PHP"],
        "test": ["php artisan test", "vendor/bin/phpunit", "vendor/bin/pest"],
        "lint": ["vendor/bin/phpstan analyse", "vendor/bin/psalm"],
        "fmt": ["pint", "php-cs-fixer"],
        "run": ["php artisan serve --port={port}", "sail up"],
        "build": ["npm run build && php artisan optimize"],
        "pkg": ["composer"],
        "lib": ["horizon", "livewire", "sanctum", "spatie/permission", "scout", "telescope"],
        "ext": ["php"],
        "dirs": ["app", "routes"],
    },
    "flutter": {
        "lang": ["Dart"],
        "test": ["flutter test", "flutter test integration_test", "melos run test"],
        "lint": ["flutter analyze", "dart analyze --fatal-infos"],
        "fmt": ["dart format"],
        "run": ["flutter run -d chrome", "flutter run --flavor dev"],
        "build": ["flutter build apk --flavor prod", "flutter build ipa"],
        "pkg": ["pub"],
        "lib": ["riverpod", "bloc", "dio", "freezed", "go_router", "hive", "drift"],
        "ext": ["dart"],
        "dirs": ["lib", "packages"],
    },
    "ios": {
        "lang": ["Swift"],
        "test": ["xcodebuild test -scheme App", "swift test", "bundle exec fastlane scan"],
        "lint": ["swiftlint --strict", "periphery scan"],
        "fmt": ["swiftformat", "swift-format"],
        "run": ["open App.xcworkspace", "tuist generate && open App.xcworkspace"],
        "build": ["bundle exec fastlane build", "xcodebuild archive -scheme App"],
        "pkg": ["Swift Package Manager", "CocoaPods", "Carthage"],
        "lib": ["Alamofire", "Kingfisher", "SnapKit", "TCA", "GRDB", "Realm"],
        "ext": ["swift"],
        "dirs": ["Sources", "App"],
    },
}

DATASTORES = [
    "PostgreSQL 13",
    "PostgreSQL 15",
    "MySQL 8.0",
    "MariaDB 10.11",
    "MongoDB 6",
    "DynamoDB",
    "Cassandra 4",
    "ClickHouse",
    "Elasticsearch 8",
    "CockroachDB",
    "SQLite",
    "Firestore",
    "Aurora MySQL",
    "TimescaleDB",
]
QUEUES = ["Kafka", "RabbitMQ", "NATS", "SQS", "Pub/Sub", "Redis Streams", "Kinesis", "Pulsar"]
CIS = ["GitHub Actions", "GitLab CI", "Jenkins", "Buildkite", "CircleCI", "Drone", "TeamCity", "Azure Pipelines"]
TARGETS = [
    "Kubernetes with Helm",
    "Argo CD",
    "Flux",
    "Nomad",
    "ECS Fargate",
    "Cloud Run",
    "Fly.io",
    "Heroku",
    "bare VMs via Ansible",
    "Azure App Service",
    "Lambda via SAM",
    "Render",
]
OBSERVABILITY = ["Datadog", "Grafana", "Prometheus", "Honeycomb", "New Relic", "Sentry", "Bugsnag", "Kibana"]
CLOUD_REGIONS = ["us-east-1", "eu-central-1", "ap-northeast-2", "ap-northeast-1", "us-west-2", "europe-west4"]
PEOPLE_EN = (
    "Aisha Bakker Bruno Chiara Dev Emeka Fatima Gregor Hana Ivan Jae Kofi Lena Mateo Noor Oskar Pilar Ravi "
    "Sofia Tomas Ulla Vera Wes Ximena Yara Zoltan Amara Benji Camille Dario Esme Felix Greta Hugo Iris Joaquin"
).split()
PEOPLE_KO = "이민호 정다은 최유진 한지민 오세훈 윤서준 강하늘 서지우 임도윤 신예린 조현우 배수아".split()
PEOPLE_JA = "佐藤 鈴木 高橋 田中 伊藤 渡辺 山本 中村 小林 加藤 吉田 山口".split()
ERRORS = [
    "TimeoutError",
    "ConnectionResetError",
    "IntegrityError",
    "DeadlockDetected",
    "NullPointerException",
    "OutOfMemoryError",
    "SerializationFailure",
    "KeyError",
    "EPIPE",
    "ECONNREFUSED",
    "context deadline exceeded",
]
CONDITIONS = [
    "the upstream answers 429",
    "the cache is cold",
    "two workers pick up the same job",
    "the payload is empty",
    "the clock skews by more than a second",
    "the disk is nearly full",
    "a retry hits a half-open circuit",
    "the tenant has no default region",
    "a batch crosses midnight",
    "the queue backs up past 10k messages",
    "the feature flag service is unreachable",
    "a request arrives during a deploy",
]
REASONS = [
    "it halves cold-start time",
    "its licence fits",
    "the old one is unmaintained",
    "it streams instead of buffering",
    "the team already knows it",
    "it supports async natively",
    "memory use dropped by a third",
    "it has first-class typing",
    "vendor support ends next year",
    "it removes a whole service",
]
PREFERENCES = [
    "small commits with one logical change each",
    "explicit type hints on public functions",
    "early returns over nested conditionals",
    "table-driven tests",
    "no new dependencies without a discussion",
    "descriptive names over abbreviations",
    "comments that explain why, not what",
    "feature branches rebased daily",
    "one assertion topic per test",
    "short functions, under 40 lines",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
KO_WEEKDAYS = ["월요일", "화요일", "수요일", "목요일", "금요일"]
JA_WEEKDAYS = ["月曜日", "火曜日", "水曜日", "木曜日", "金曜日"]
VERBS = "sync load render fetch flush resolve validate encode merge dispatch compact refresh publish archive".split()

# ---------------------------------------------------------------- templates: (kind, type, text)

EN = [
    # commands
    ("command", "runbook", "Run the {comp} tests with `{test}`; they need {db} running locally."),
    ("command", "runbook", "tests ({comp}): `{test}` - the {noun} fixtures are slow, add -k to narrow it down."),
    ("command", "runbook", "Lint before pushing {project}: `{lint}`. CI runs the same command."),
    ("command", "runbook", "To build {project}: `{build}`. The artifact ends up in dist/ and is what {ci} uploads."),
    ("command", "runbook", "Local dev for {project}: `{run}`, then open http://localhost:{port}."),
    ("command", "runbook", "- {comp}: format with {fmt} before committing, the pre-commit hook only checks."),
    ("command", "runbook", "Q: how do I run only the {noun} tests in {project}? A: `{test}` with the {noun} marker."),
    # decisions
    ("decision", "project_decision", "We chose {lib} over {lib2} for {comp} because {reason}."),
    (
        "decision",
        "project_decision",
        "ADR-{n_adr} ({project}): store {nouns} in {db}. Context: {queue} alone could not answer point lookups. "
        "Consequence: {comp} owns the schema.",
    ),
    (
        "decision",
        "project_decision",
        "Decision {date}: {project} moves its {noun} jobs from cron to {queue} consumers.",
    ),
    (
        "decision",
        "project_decision",
        "{project} will not support {db2}; everything persistent goes to {db}, decided with {person} on {date}.",
    ),
    ("decision", "project_decision", "Decided: {comp} talks to {comp2} over gRPC, not REST, because {reason}."),
    # conventions
    ("convention", "constraint", "In {project}, {noun} ids are ULIDs, never auto-increment integers."),
    ("convention", "constraint", "{project} convention: one {lang} module per {noun} aggregate under {dir}/{noun}/."),
    ("convention", "preference", "Branch names in {project} look like {ticket_prefix}-1234/short-description."),
    (
        "convention",
        "constraint",
        "All timestamps in {project} are stored in UTC and rendered in the {noun} owner's timezone.",
    ),
    ("convention", "constraint", "{comp}: public functions get docstrings; private helpers start with an underscore."),
    ("convention", "constraint", "Feature flags in {project} are named {project}_{noun}_<feature> and live in {path}."),
    # architecture
    (
        "architecture",
        "project_fact",
        "{project} is split into {comp} (the API), {comp2} (background jobs) and a {db} database; "
        "they share nothing but the {queue} topics.",
    ),
    (
        "architecture",
        "project_fact",
        "{comp} reads {nouns} from {queue}, enriches them with data from {comp2} and writes the result to {db}. "
        "Backpressure comes from the consumer group lag, which {obs} graphs.",
    ),
    (
        "architecture",
        "project_fact",
        "The {noun} service in {project} is stateless; sessions live in Redis for {n_min} minutes.",
    ),
    (
        "architecture",
        "project_fact",
        "{project} architecture note: requests enter through {comp}, which validates them and puts a {noun} job on "
        "{queue}. {comp2} processes jobs in batches of {n_batch}. Nothing else writes to {db}.",
    ),
    # runbooks
    (
        "runbook",
        "runbook",
        "If {comp} stops consuming, check the lag dashboard in {obs}, then restart the deployment; "
        "never purge the queue.",
    ),
    (
        "runbook",
        "runbook",
        "Rolling back {project}: redeploy the previous image tag from {ci}; database migrations are forward-only.",
    ),
    (
        "runbook",
        "runbook",
        "Incident playbook ({project}): page {person}, post in {channel}, freeze deploys until resolved.",
    ),
    ("runbook", "runbook", "Rotate the {comp} TLS certificate every 90 days; the reminder is in {channel}."),
    (
        "runbook",
        "runbook",
        "To reprocess failed {nouns} in {project}, run `{verb}-{noun} --since 24h` from the ops box.",
    ),
    # warnings
    ("warning", "warning", "Careful: {func}() in {comp} is not thread-safe; call it only from the main loop."),
    ("warning", "warning", "Gotcha: the {project} staging {db} is shared with QA, don't truncate tables there."),
    ("warning", "warning", "Never run `{verb}-all` against production {project}; it rewrites every {noun} row."),
    ("warning", "warning", "NB: {comp} silently drops {nouns} larger than {n_mb} MB."),
    # owners
    ("owner", "relationship", "{person} owns {comp}; ask {person} before changing {path}."),
    ("owner", "relationship", "{comp} questions go to {person} (backend) or {person2} (infra)."),
    ("owner", "relationship", "Code owner for the {noun} module in {project}: {person}."),
    # config
    ("config", "project_fact", "{comp} reads {env} at start-up; without it {func}() raises {error}."),
    (
        "config",
        "project_fact",
        "{project} config lives in {path}; environment variables with the prefix {envprefix}_ override it.",
    ),
    ("config", "project_fact", "{comp} listens on port {port} and exposes metrics on {port2}."),
    ("config", "project_fact", "{env}: how long {comp} waits for {comp2}, in seconds; default {n_small}0."),
    # pins
    ("pin", "constraint", "{project} pins {lib} to {version} because {version2} broke {func} in {path}."),
    ("pin", "constraint", "Don't upgrade {lib} in {project} past {version}: the {noun} serializer changed."),
    ("pin", "constraint", "{comp} needs {langname} {langver}; newer versions fail the {noun} tests."),
    # api
    ("api", "project_fact", "The {comp} endpoint {endpoint} returns {http} when {condition}."),
    ("api", "project_fact", "{endpoint} in {project} is paginated with a cursor; page size is capped at {n_page}."),
    ("api", "project_fact", "{comp} accepts {nouns} only as JSON; form posts get a 415."),
    # perf
    ("perf", "benchmark_requirement", "{comp} must answer {endpoint} within {n_ms} ms at p99."),
    (
        "perf",
        "benchmark_requirement",
        "Budget for {project}: {noun} import of 1M rows under {n_min} minutes on one worker.",
    ),
    ("perf", "benchmark_requirement", "The {project} app bundle must stay under {n_mb} MB gzipped."),
    # preferences
    ("preference", "preference", "The user prefers {pref} when working on {project}."),
    ("preference", "preference", "For {project}, the user wants {pref} and PR titles in the imperative."),
    ("preference", "preference", "User likes explanations with a short example first, then the details ({project})."),
    # events
    ("event", "temporal_event", "On {date} {project} moved {comp} from {target2} to {target}."),
    ("event", "temporal_event", "{date}: {project} {noun} outage, {n_min} minutes, root cause {error} in {comp}."),
    ("event", "temporal_event", "{project} launched the {noun} beta on {date} for {n_pct}% of users."),
    # bugs
    ("bug", "warning", "Known bug: {func} in {path} leaks connections when {condition}; restart {comp} nightly."),
    ("bug", "warning", "{comp} double-counts {nouns} when {condition} ({ticket_prefix}-{n_ticket})."),
    ("bug", "warning", "TODO({person}): {func} ignores the {noun} timezone; fix before the {noun} report ships."),
    # glossary
    ("glossary", "project_fact", 'In {project}, a "{noun}" means a group of {nouns2} handled by one {comp} worker.'),
    ("glossary", "project_fact", "Glossary ({project}): {noun} = the unit {comp} bills for; {noun2} = its line items."),
    # onboarding
    (
        "onboarding",
        "runbook",
        "New to {project}? Clone it, install {pkg}, run `{run}` and read docs/architecture.md first.",
    ),
    (
        "onboarding",
        "runbook",
        "First week on {project}: pair with {person} on a {noun} bug, then pick a good-first-issue.",
    ),
]

KO = [
    ("command", "runbook", "{project} {comp} 테스트는 `{test}`로 돌리고, 로컬에 {db}가 떠 있어야 한다."),
    ("command", "runbook", "{project} 빌드는 `{build}` 한 번이면 된다. 결과물은 dist/ 아래에 생긴다."),
    ("command", "runbook", "{project} 로컬 실행: `{run}` 후 http://localhost:{port} 접속."),
    ("decision", "project_decision", "{project}는 {lib2} 대신 {lib}를 쓰기로 했다. 이유: {reason_ko}."),
    ("decision", "project_decision", "{date} 결정: {project}의 {ko_noun} 작업은 cron 대신 {queue} 컨슈머로 처리한다."),
    ("convention", "constraint", "{project}에서 {ko_noun} ID는 ULID를 쓰고, 자동 증가 정수는 쓰지 않는다."),
    ("convention", "constraint", "{project} 커밋 전에 {fmt}로 포맷을 맞추고, 함수 이름은 동사로 시작한다."),
    (
        "architecture",
        "project_fact",
        "{project}는 API 서버 {comp}와 배치 서버 {comp2}로 나뉘며, 둘은 {queue} 토픽으로만 통신한다.",
    ),
    ("runbook", "runbook", "{comp}가 멈추면 {obs} 대시보드에서 지연을 먼저 확인하고, 큐는 절대 비우지 않는다."),
    ("runbook", "runbook", "{project} 장애 시 {ko_person}에게 연락하고 {channel}에 상황을 공유한다."),
    ("warning", "warning", "주의: {project} 스테이징 {db}는 QA와 같이 쓰므로 테이블을 지우면 안 된다."),
    ("warning", "warning", "{comp}의 {func}()는 스레드 안전하지 않으니 메인 루프에서만 호출할 것."),
    ("owner", "relationship", "{comp} 담당자는 {ko_person}이고, {path}를 바꾸기 전에 먼저 물어본다."),
    ("config", "project_fact", "{comp}는 시작할 때 {env} 환경 변수를 읽으며, 없으면 {error}가 난다."),
    ("config", "project_fact", "{project} 설정 파일은 {path}에 있고 {envprefix}_로 시작하는 환경 변수로 덮어쓴다."),
    ("pin", "constraint", "{project}는 {lib}를 {version}로 고정한다. {version2}에서 {ko_noun} 처리가 깨졌다."),
    ("api", "project_fact", "{comp}의 {endpoint}는 {condition_ko} {http}를 돌려준다."),
    ("perf", "benchmark_requirement", "{comp}는 {endpoint} 요청에 p99 {n_ms}ms 안에 응답해야 한다."),
    ("preference", "preference", "사용자는 {project} 작업할 때 작은 PR과 한국어 커밋 설명을 선호한다."),
    (
        "event",
        "temporal_event",
        "{date}에 {project} {ko_noun} 장애가 {n_min}분 동안 있었고, 원인은 {comp}의 {error}였다.",
    ),
    ("bug", "warning", "알려진 버그: {condition_ko} {comp}가 {ko_noun}을 두 번 센다. 우회: 야간 재시작."),
    ("onboarding", "runbook", "{project} 처음 오면 {pkg} 설치 후 `{run}` 실행하고 docs/architecture.md부터 읽기."),
    ("command", "runbook", "{project} 린트: `{lint}` (CI에서도 똑같이 돈다)"),
    ("glossary", "project_fact", "{project}에서 '{ko_noun}'은(는) {comp}가 과금하는 단위를 뜻한다."),
]

JA = [
    ("command", "runbook", "{project}の{comp}のテストは`{test}`で実行し、ローカルで{db}を起動しておく必要があります。"),
    ("command", "runbook", "{project}のビルドは`{build}`です。成果物はdist/に出力されます。"),
    ("command", "runbook", "{project}をローカルで動かす: `{run}` を実行して http://localhost:{port} を開く。"),
    ("decision", "project_decision", "{project}では{lib2}ではなく{lib}を採用しました。理由は{reason_ja}ためです。"),
    (
        "decision",
        "project_decision",
        "{date}決定：{project}の{ja_noun}処理はcronをやめて{queue}のコンシューマーで行う。",
    ),
    ("convention", "constraint", "{project}の{ja_noun}のIDはULIDを使い、連番の整数は使いません。"),
    ("convention", "constraint", "{project}ではコミット前に{fmt}で整形し、関数名は動詞から始めます。"),
    (
        "architecture",
        "project_fact",
        "{project}はAPIサーバーの{comp}とバッチの{comp2}に分かれていて、両者は{queue}のトピックでのみ連携します。",
    ),
    ("runbook", "runbook", "{comp}が止まったら、まず{obs}のダッシュボードで遅延を確認し、キューは絶対に消さないこと。"),
    ("runbook", "runbook", "{project}で障害が起きたら{ja_person}さんに連絡し、{channel}で状況を共有します。"),
    ("warning", "warning", "注意：{project}のステージングの{db}はQAと共用なので、テーブルを消さないでください。"),
    ("warning", "warning", "{comp}の{func}()はスレッドセーフではないので、メインループからだけ呼ぶこと。"),
    ("owner", "relationship", "{comp}の担当は{ja_person}さんです。{path}を変更する前に相談してください。"),
    ("config", "project_fact", "{comp}は起動時に環境変数{env}を読み、無いと{error}になります。"),
    ("config", "project_fact", "{project}の設定ファイルは{path}にあり、{envprefix}_で始まる環境変数で上書きできます。"),
    ("pin", "constraint", "{project}は{lib}を{version}に固定しています。{version2}で{ja_noun}の処理が壊れました。"),
    ("api", "project_fact", "{comp}の{endpoint}は、{condition_ja}に{http}を返します。"),
    ("perf", "benchmark_requirement", "{comp}は{endpoint}にp99で{n_ms}ms以内に応答する必要があります。"),
    ("preference", "preference", "ユーザーは{project}の作業では小さめのPRと日本語の説明を好みます。"),
    ("event", "temporal_event", "{date}に{project}で{ja_noun}の障害が{n_min}分発生し、原因は{comp}の{error}でした。"),
    ("bug", "warning", "既知のバグ：{condition_ja}に{comp}が{ja_noun}を二重に数える。回避策は夜間の再起動。"),
    (
        "onboarding",
        "runbook",
        "{project}に初めて参加したら、{pkg}を入れて`{run}`を実行し、docs/architecture.mdを読むこと。",
    ),
    ("command", "runbook", "{project}のlint: `{lint}`（CIでも同じコマンドが走ります）"),
    ("glossary", "project_fact", "{project}でいう「{ja_noun}」は、{comp}が課金する単位のことです。"),
]

# Notes about the user's machine and habits, with no project.
GLOBAL = [
    ("preference", "preference", "The user's shell is zsh with starship; aliases live in ~/.zshrc.local."),
    (
        "preference",
        "preference",
        "The user reads diffs side by side; prefer `git difftool` suggestions over unified diffs.",
    ),
    ("preference", "preference", "The user works on a {laptop}; Docker Desktop is limited to {n_small} GB of memory."),
    ("preference", "preference", "Answer with the command first, then a one-line explanation."),
    ("preference", "preference", "The user's editor is {editor}; format-on-save is on."),
    ("preference", "preference", "사용자는 설명보다 바로 실행할 수 있는 명령어를 먼저 보고 싶어 한다."),
    ("preference", "preference", "ユーザーは回答の最後に要点を三行でまとめてほしいと言っている。"),
    ("preference", "preference", "The user is in the {tz} time zone and usually works {hours}."),
]
LAPTOPS = ["MacBook Pro M3", "ThinkPad X1 running Fedora", "MacBook Air M2", "Framework 13 with Ubuntu"]
EDITORS = ["Neovim", "VS Code", "IntelliJ IDEA", "Helix", "Zed", "Emacs"]
TIMEZONES = ["KST", "JST", "CET", "PST", "UTC"]
HOURS = ["late evenings", "early mornings", "nine to six", "in two blocks split by lunch"]
KO_REASONS = [
    "유지보수가 끊겼다",
    "메모리 사용량이 절반이다",
    "팀이 이미 익숙하다",
    "라이선스가 맞다",
    "비동기를 기본 지원한다",
]
JA_REASONS = [
    "保守が止まっていた",
    "メモリ使用量が半分になる",
    "チームが慣れている",
    "ライセンスが合う",
    "非同期に対応している",
]
KO_CONDITIONS = ["업스트림이 429를 돌려주면", "캐시가 비어 있으면", "요청이 배포 중에 들어오면", "배치가 자정을 넘기면"]
JA_CONDITIONS = [
    "上流が429を返したとき",
    "キャッシュが空のとき",
    "デプロイ中にリクエストが来たとき",
    "バッチが日付をまたいだとき",
]
HTTP = ["400", "404", "409", "422", "425", "503"]
SOURCES = ["session:synthetic", "doc:README.md", "user", "tool:ci-log", "doc:CONTRIBUTING.md", "session:review"]

_SLOT_RE = re.compile(r"\{(\w+)\}")


class Project:
    """A made-up project: its name, domain, stack, components, people, tools and team language."""

    def __init__(self, name: str, rng: random.Random) -> None:
        self.name = name
        self.domain = rng.choice(sorted(DOMAINS))
        self.stack_name = rng.choice(sorted(STACKS))
        self.stack = STACKS[self.stack_name]
        roll = rng.random()
        self.language = "ko" if roll < 0.12 else "ja" if roll < 0.2 else "en"
        nouns = DOMAINS[self.domain]["en"]
        roles = ["api", "worker", "web", "sync", "gateway", "scheduler", "importer", "admin", "notifier", "etl"]
        self.components = sorted({f"{name}-{rng.choice(nouns + roles)}" for _ in range(rng.randint(2, 5))})
        if self.language == "ko":
            people = rng.sample(PEOPLE_KO, 3)
        elif self.language == "ja":
            people = [p + "さん" for p in rng.sample(PEOPLE_JA, 3)]
        else:
            people = rng.sample(PEOPLE_EN, 3)
        self.people = people
        self.db = rng.choice(DATASTORES)
        self.db2 = rng.choice([d for d in DATASTORES if d != self.db])
        self.queue = rng.choice(QUEUES)
        self.ci = rng.choice(CIS)
        self.target = rng.choice(TARGETS)
        self.obs = rng.choice(OBSERVABILITY)
        self.port = rng.choice([3000, 4000, 5000, 5173, 8000, 8080, 8081, 8443, 9000, 9292]) + rng.randint(0, 9)
        self.ticket = "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(rng.randint(2, 4)))


class Slots(dict[str, str]):
    """Slot values for one note, drawn on first use (so a slot used twice reads the same)."""

    def __init__(self, project: Project | None, rng: random.Random) -> None:
        super().__init__()
        self.p = project
        self.rng = rng

    def __missing__(self, name: str) -> str:
        value = self._draw(name)
        self[name] = value
        return value

    def _draw(self, name: str) -> str:
        rng, p = self.rng, self.p
        if name == "laptop":
            return rng.choice(LAPTOPS)
        if name == "editor":
            return rng.choice(EDITORS)
        if name == "tz":
            return rng.choice(TIMEZONES)
        if name == "hours":
            return rng.choice(HOURS)
        if name == "n_small":
            return str(rng.randint(2, 9))
        assert p is not None, name
        domain = DOMAINS[p.domain]
        if name == "project":
            return p.name
        if name in ("comp", "comp2"):
            other = self.get("comp") if name == "comp2" else None
            choices = [c for c in p.components if c != other] or p.components
            return rng.choice(choices)
        if name in ("person", "person2"):
            return rng.choice([x for x in p.people if x != self.get("person")] if name == "person2" else p.people)
        if name == "ko_person":
            return p.people[0] if p.language == "ko" else rng.choice(PEOPLE_KO)
        if name == "ja_person":
            return p.people[0].removesuffix("さん") if p.language == "ja" else rng.choice(PEOPLE_JA)
        if name in ("noun", "noun2"):
            return rng.choice([n for n in domain["en"] if n != self.get("noun")])
        if name in ("nouns", "nouns2"):
            noun = self["noun"] if name == "nouns" else self["noun2"]
            return noun + ("es" if noun.endswith(("s", "x", "ch")) else "s")
        if name == "ko_noun":
            return rng.choice(domain["ko"])
        if name == "ja_noun":
            return rng.choice(domain["ja"])
        if name in ("test", "lint", "run", "build"):
            return rng.choice(p.stack[name]).format(port=p.port, project=p.name)
        if name in ("fmt", "pkg"):
            return rng.choice(p.stack[name])
        if name in ("lib", "lib2"):
            return rng.choice([x for x in p.stack["lib"] if x != self.get("lib")])
        if name == "lang":
            return p.stack["lang"][0]
        if name == "langname":
            return p.stack["lang"][0]
        if name == "langver":
            return f"{rng.randint(1, 21)}.{rng.randint(0, 12)}"
        if name in ("version", "version2"):
            return f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}"
        if name in ("db", "db2", "queue", "ci", "target", "obs"):
            return str(getattr(p, name))
        if name == "target2":
            return rng.choice([t for t in TARGETS if t != p.target])
        if name in ("port", "port2"):
            return str(p.port if name == "port" else p.port + 1000 + rng.randint(0, 99))
        if name == "dir":
            return rng.choice(p.stack["dirs"])
        if name in ("path", "path2"):
            ext = rng.choice(p.stack["ext"] + ["yaml", "toml", "json"])
            return f"{rng.choice(p.stack['dirs'])}/{self['noun']}/{rng.choice(VERBS)}_{self['noun']}.{ext}"
        if name == "func":
            verb, noun = rng.choice(VERBS), self["noun"]
            return f"{verb}_{noun}" if rng.random() < 0.5 else f"{verb}{noun.capitalize()}"
        if name == "verb":
            return rng.choice(VERBS)
        if name == "env":
            suffix = rng.choice(["URL", "TIMEOUT", "DSN", "POOL"])
            return f"{p.name.upper().replace('-', '_')}_{self['noun'].upper()}_{suffix}"
        if name == "envprefix":
            return p.name.upper().replace("-", "_")
        if name == "endpoint":
            return f"/{rng.choice(['v1', 'v2', 'api', 'internal'])}/{self['nouns']}/{{id}}"
        if name == "http":
            return rng.choice(HTTP)
        if name == "error":
            return rng.choice(ERRORS)
        if name == "condition":
            return rng.choice(CONDITIONS)
        if name == "condition_ko":
            return rng.choice(KO_CONDITIONS)
        if name == "condition_ja":
            return rng.choice(JA_CONDITIONS)
        if name == "reason":
            return rng.choice(REASONS)
        if name == "reason_ko":
            return rng.choice(KO_REASONS)
        if name == "reason_ja":
            return rng.choice(JA_REASONS)
        if name == "pref":
            return rng.choice(PREFERENCES)
        if name == "date":
            return f"{rng.randint(2019, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if name == "channel":
            return f"#{p.name}-{rng.choice(['dev', 'ops', 'alerts', 'oncall', 'team'])}"
        if name == "ticket_prefix":
            return p.ticket
        if name in ("n_adr", "n_ticket"):
            return str(rng.randint(3, 4999))
        if name == "n_min":
            return str(rng.choice([5, 10, 15, 20, 30, 45, 60, 90]))
        if name == "n_ms":
            return str(rng.choice([20, 50, 80, 150, 250, 400, 800, 1200]))
        if name == "n_mb":
            return str(rng.choice([1, 2, 5, 8, 10, 25, 50, 200]))
        if name == "n_pct":
            return str(rng.choice([1, 5, 10, 25, 50]))
        if name == "n_page":
            return str(rng.choice([50, 100, 200, 500, 1000]))
        if name == "n_batch":
            return str(rng.choice([50, 100, 250, 500, 1000]))
        raise KeyError(name)


class Note:
    """One distractor: its import line and, for some, how it is retired later."""

    __slots__ = ("line", "retire")

    def __init__(self, line: dict[str, Any], retire: tuple[str, str | None] | None = None) -> None:
        self.line = line
        self.retire = retire  # ("supersede", new content) or ("forget" | "deprecate" | "expire", None)


def _project_names(count: int, rng: random.Random, reserved: set[str]) -> list[str]:
    names: set[str] = set()
    attempts = 0
    while len(names) < count and attempts < count * 50:
        attempts += 1
        roll = rng.random()
        if roll < 0.55:
            name = rng.choice(_NAME_LEFT) + rng.choice(_NAME_RIGHT)
        elif roll < 0.8:
            name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice([2, 3])))
        elif roll < 0.9:
            name = f"{rng.choice(_NAME_LEFT)}-{rng.choice(_NAME_RIGHT)}"
        else:
            name = f"{rng.choice(_NAME_LEFT)}{rng.randint(2, 99)}"
        if len(name) > 3 and not any(r in name for r in reserved):
            names.add(name)
    while len(names) < count:  # the pools ran out (very large stores): numbered names
        names.add(f"{rng.choice(_NAME_LEFT)}{rng.choice(_NAME_RIGHT)}{len(names)}")
    return sorted(names)


def _clean(text: str, reserved_terms: Iterable[str]) -> bool:
    lowered = text.lower()
    return not any(term in lowered for term in reserved_terms)


def _words_clean(text: str, reserved_words: set[str]) -> bool:
    return not reserved_words.intersection(re.findall(r"[a-z0-9]+", text.lower()))


def notes(
    count: int,
    seed: int = 23,
    reserved: Iterable[str] = (),
    *,
    retired_share: float = 0.1,
) -> list[Note]:
    """``count`` distractor notes about made-up projects, about ``retired_share`` of them to be retired.

    ``reserved``: words and terms no note may contain (compared lower-cased; plain
    words as whole words, anything else as a substring), and that no project name
    may contain.
    """
    rng = random.Random(seed)
    terms = {t.lower() for t in reserved if t}
    words = {t for t in terms if re.fullmatch(r"[a-z0-9]+", t)}
    substrings = terms - words
    names = _project_names(max(4, count // 60), rng, {t for t in words if len(t) > 3})
    projects = [Project(name, rng) for name in names]
    # Projects differ in size, as real ones do: a few big, many small.
    weights = [1.0 / (1 + i % 17) for i in range(len(projects))]
    seen: set[str] = set()
    result: list[Note] = []
    attempts = 0
    while len(result) < count and attempts < count * 20:
        attempts += 1
        if rng.random() < 0.03:
            project = None
            kind, type_, template = rng.choice(GLOBAL)
        else:
            project = rng.choices(projects, weights)[0]
            kind, type_, template = _pick_template(project, rng)
        content = template.format_map(Slots(project, rng))
        if content in seen or not _clean(content, substrings) or not _words_clean(content, words):
            continue
        seen.add(content)
        line: dict[str, Any] = {
            "content": content,
            "source": rng.choice(SOURCES),
            "type": type_,
            "tags": [kind] + ([project.name] if project else []),
        }
        if project is not None:
            line["scope"] = {"project": project.name}
            if rng.random() < 0.3:
                line["key"] = f"{project.name}.{kind}.{len(result)}"
        retire = None
        if rng.random() < retired_share:
            retire = _retirement(template, project, rng, seen, substrings, words)
        result.append(Note(line, retire))
    return result


def _pick_template(project: Project, rng: random.Random) -> tuple[str, str, str]:
    roll = rng.random()
    if project.language == "ko" and roll < 0.6:
        return rng.choice(KO)
    if project.language == "ja" and roll < 0.6:
        return rng.choice(JA)
    if project.language == "en" and roll < 0.02:
        return rng.choice(KO if roll < 0.01 else JA)
    return rng.choice(EN)


def _retirement(
    template: str, project: Project | None, rng: random.Random, seen: set[str], substrings: set[str], words: set[str]
) -> tuple[str, str | None]:
    roll = rng.random()
    if roll < 0.45:
        for _ in range(10):
            content = template.format_map(Slots(project, rng))
            if content not in seen and _clean(content, substrings) and _words_clean(content, words):
                seen.add(content)
                return ("supersede", content)
        return ("forget", None)
    if roll < 0.7:
        return ("forget", None)
    if roll < 0.85:
        return ("deprecate", None)
    return ("expire", None)


def template_count() -> dict[str, int]:
    """How many phrasings the grammar has, by language (for the evaluation's docstring and checks)."""
    return {"en": len(EN), "ko": len(KO), "ja": len(JA), "global": len(GLOBAL)}
