"""Write the sample corpus (tests/corpus/) the golden queries, the demo and the
search benchmark use: a company's internal documentation, from hand-written
sentences and templates (no random tokens), deterministic (same files every run).

What it holds, on purpose:
- several top folders (handbook, policies, engineering, finance, security,
  product, zh, ja), each a source of its own;
- same-name files in different folders (every team has overview.md, oncall.md,
  runbook.md and faq.md; every region has holidays.md and benefits.md);
- long documents (the architecture guide, the security standard);
- near-duplicates (travel policy 2025 and 2026 differ in a few numbers;
  incident reports share their skeleton);
- Chinese and Japanese documents.

    python scripts/make_corpus.py [--out tests/corpus] [--scale N]

`--scale N` writes N copies of the generated families under `bulk-<i>/`
(the benchmark's 1k/5k/10k corpora); the default writes the golden corpus.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

TEAMS = {
    "payments": (
        "Priya Raman",
        "#team-payments",
        "ledger-api",
        "card authorisation",
        "99.95%",
        "Stripe and Adyen",
    ),
    "search": ("Tomás Ortega", "#team-search", "query-service", "document search", "99.9%", "the BM25 index"),
    "mobile": (
        "Hana Suzuki",
        "#team-mobile",
        "mobile-gateway",
        "the iOS and Android apps",
        "99.5%",
        "push notifications",
    ),
    "data": (
        "Grace Okafor",
        "#team-data",
        "warehouse-loader",
        "nightly reporting",
        "99.0%",
        "the Snowflake warehouse",
    ),
    "infra": (
        "Lars Nilsson",
        "#team-infra",
        "cluster-autoscaler",
        "Kubernetes clusters",
        "99.99%",
        "Terraform",
    ),
    "identity": (
        "Amara Diallo",
        "#team-identity",
        "auth-service",
        "login and single sign-on",
        "99.99%",
        "Okta",
    ),
    "billing": (
        "Wei Zhang",
        "#team-billing",
        "invoice-runner",
        "monthly invoicing",
        "99.9%",
        "the tax engine",
    ),
    "growth": (
        "Sofia Rossi",
        "#team-growth",
        "experiment-service",
        "A/B experiments",
        "99.5%",
        "feature flags",
    ),
}

REGIONS = {
    "germany": (
        "Berlin",
        30,
        "Tag der Deutschen Einheit on 3 October",
        "statutory health insurance",
        "EUR 40",
    ),
    "france": ("Paris", 25, "Bastille Day on 14 July", "a mutuelle top-up health plan", "EUR 35"),
    "japan": (
        "Tokyo",
        20,
        "Golden Week from late April to early May",
        "the national health insurance",
        "JPY 5000",
    ),
    "china": (
        "Shanghai",
        15,
        "Spring Festival with seven days off",
        "commercial medical insurance",
        "CNY 300",
    ),
    "usa": (
        "New York",
        20,
        "Thanksgiving on the fourth Thursday of November",
        "a PPO medical plan",
        "USD 50",
    ),
    "uk": ("London", 28, "the August bank holiday", "private medical insurance with Bupa", "GBP 30"),
    "brazil": ("São Paulo", 30, "Carnival with two days off", "a Unimed health plan", "BRL 200"),
    "india": ("Bengaluru", 24, "Diwali with two days off", "group mediclaim cover", "INR 2000"),
}

SERVICES = [
    (
        "checkout",
        "an expired TLS certificate on the load balancer",
        "renewed the certificate and added expiry alerts",
    ),
    (
        "login",
        "a misconfigured Okta redirect URI after a deploy",
        "rolled back the deploy and added a config test",
    ),
    ("invoice-runner", "a cron job that ran twice after a daylight saving change", "made the job idempotent"),
    ("query-service", "an index shard that ran out of disk", "added disk headroom alerts at 80 percent"),
    (
        "mobile-gateway",
        "a rate limit set too low for the new app version",
        "raised the limit and load tested",
    ),
    (
        "warehouse-loader",
        "a schema change upstream that dropped a column",
        "added contract tests for the feed",
    ),
    (
        "ledger-api",
        "a database connection pool exhausted by slow queries",
        "added query timeouts and an index",
    ),
    ("experiment-service", "a feature flag cache that never expired", "set a five minute cache lifetime"),
    ("auth-service", "clock skew between nodes breaking token validation", "enabled NTP monitoring"),
    (
        "cluster-autoscaler",
        "a quota limit in the cloud account",
        "requested a higher quota and alerted on usage",
    ),
]

HANDBOOK = {
    "handbook/welcome.md": (
        "Welcome to Northwind",
        [
            (
                "Your first week",
                [
                    "Your manager sends you a first-week plan before your start date.",
                    "On day one you meet your onboarding buddy, who answers questions for your first month.",
                    "Laptops are shipped to your home address five working days before you start.",
                ],
            ),
            (
                "Who to ask",
                [
                    "People questions go to the People team in #ask-people.",
                    "IT problems go to the help desk at helpdesk@northwind.example.",
                ],
            ),
        ],
    ),
    "handbook/benefits/parental-leave.md": (
        "Parental leave",
        [
            (
                "How much leave",
                [
                    "Every parent receives 20 weeks of fully paid parental leave, regardless of gender.",
                    "Leave can be taken in up to three blocks within the first 18 months after birth or adoption.",
                ],
            ),
            (
                "Returning to work",
                [
                    "Parents may work four days a week at full pay for the first month back.",
                    "Tell your manager and the People team at least eight weeks before your leave starts.",
                ],
            ),
        ],
    ),
    "handbook/benefits/learning-budget.md": (
        "Learning budget",
        [
            (
                "Yearly budget",
                [
                    "Each employee has a learning budget of 1500 euros per calendar year for courses, books and conferences.",
                    "Unused budget does not roll over to the next year.",
                ],
            ),
            (
                "How to claim",
                [
                    "Submit the receipt in the expense tool under the category Learning.",
                    "Conference travel counts against the travel budget, not the learning budget.",
                ],
            ),
        ],
    ),
    "handbook/benefits/health.md": (
        "Health and wellbeing",
        [
            (
                "Mental health",
                [
                    "Everyone can book eight free sessions per year with a licensed therapist through Spring Health.",
                    "Sessions are confidential and are never reported to your manager.",
                ],
            ),
            ("Gym", ["A monthly gym allowance is paid with your salary; the amount depends on your region."]),
        ],
    ),
    "handbook/working/remote-work.md": (
        "Remote work",
        [
            (
                "Where you can work",
                [
                    "You may work from any country where Northwind has an entity for up to 60 days per year.",
                    "Working from another country for longer needs approval from the People team and Legal.",
                ],
            ),
            (
                "Home office",
                [
                    "New employees receive a one-time home office allowance of 800 euros for a desk, chair and monitor.",
                    "A monthly internet allowance is paid with your salary.",
                ],
            ),
        ],
    ),
    "handbook/working/working-hours.md": (
        "Working hours",
        [
            (
                "Core hours",
                [
                    "Core collaboration hours are from 13:00 to 16:00 Central European Time.",
                    "Outside core hours you plan your own day, as long as your team knows how to reach you.",
                ],
            ),
            (
                "Overtime",
                ["Overtime must be agreed with your manager in advance and is compensated with time off."],
            ),
        ],
    ),
    "handbook/working/performance-reviews.md": (
        "Performance reviews",
        [
            (
                "Cycle",
                [
                    "Performance reviews happen twice a year, in March and September.",
                    "Each review combines a self review, peer feedback from three colleagues and a manager review.",
                ],
            ),
            (
                "Promotions",
                [
                    "Promotions are decided by a calibration committee after the September review.",
                    "A promotion case needs concrete examples of impact at the next level.",
                ],
            ),
        ],
    ),
    "handbook/leaving/offboarding.md": (
        "Leaving Northwind",
        [
            ("Notice", ["The notice period is one month during probation and three months afterwards."]),
            (
                "Equipment",
                [
                    "Return your laptop and badge on your last day; the help desk sends a prepaid shipping box.",
                    "Access to all systems is removed at 18:00 on your last working day.",
                ],
            ),
        ],
    ),
    "handbook/faq.md": (
        "Handbook FAQ",
        [
            ("Payday", ["Salaries are paid on the 25th of each month, or the last working day before it."]),
            ("Payslips", ["Payslips are available in the payroll portal on the day salaries are paid."]),
            ("Sabbatical", ["After five years at Northwind you may take a paid sabbatical of four weeks."]),
        ],
    ),
}

POLICIES = {
    "policies/code-of-conduct.md": (
        "Code of conduct",
        [
            (
                "Respect",
                ["We treat every colleague, customer and candidate with respect, online and offline."],
            ),
            (
                "Reporting",
                [
                    "Report harassment to your manager, the People team or anonymously through the EthicsPoint hotline.",
                    "Retaliation against anyone who reports in good faith is a dismissal offence.",
                ],
            ),
        ],
    ),
    "policies/gifts-and-hospitality.md": (
        "Gifts and hospitality",
        [
            (
                "Limits",
                [
                    "You may accept gifts from suppliers worth up to 50 euros; anything above must be declared in the gift register.",
                    "Cash or gift cards must never be accepted, whatever the amount.",
                ],
            ),
        ],
    ),
    "policies/data-retention.md": (
        "Data retention",
        [
            (
                "Retention periods",
                [
                    "Customer support tickets are kept for three years after the ticket is closed.",
                    "Application logs are kept for 30 days, audit logs for seven years.",
                ],
            ),
            ("Deletion", ["When a customer asks for erasure we delete their personal data within 30 days."]),
        ],
    ),
    "policies/acceptable-use.md": (
        "Acceptable use of company systems",
        [
            (
                "Devices",
                [
                    "Company laptops must have disk encryption and automatic screen lock after five minutes.",
                    "Personal use is allowed within reason, but never for illegal content or crypto mining.",
                ],
            ),
            ("Software", ["Install software only from the self-service catalogue or with IT approval."]),
        ],
    ),
}

SECURITY_STANDARD = [
    ("Scope", "This standard applies to every system that stores or processes customer data."),
    ("Passwords", "Passwords must be at least 14 characters long and are stored with Argon2id."),
    (
        "Multi-factor authentication",
        "Hardware security keys are mandatory for production access and for the admin console.",
    ),
    (
        "Encryption at rest",
        "Customer data is encrypted at rest with AES-256 keys managed in the cloud key service.",
    ),
    ("Encryption in transit", "All traffic uses TLS 1.2 or newer; TLS 1.0 and 1.1 are disabled at the edge."),
    ("Secrets", "Secrets live in Vault; a secret found in a repository is rotated within 24 hours."),
    (
        "Vulnerability management",
        "Critical vulnerabilities are patched within 7 days, high ones within 30 days.",
    ),
    ("Penetration tests", "An external firm runs a penetration test every year before the SOC 2 audit."),
    ("Access reviews", "Managers review the production access of their reports every quarter."),
    ("Logging", "Security events are shipped to the SIEM and kept for one year."),
    ("Incident response", "A suspected breach is reported to the security on-call within one hour."),
    ("Vendors", "Vendors that process customer data complete a security questionnaire before signing."),
    ("Backups", "Production databases are backed up every hour and restores are tested every month."),
    ("Laptops", "Lost or stolen laptops are reported to the help desk, which wipes them remotely."),
]

ARCHITECTURE = [
    ("Overview", "Northwind runs a service-oriented architecture on Kubernetes in two cloud regions."),
    (
        "Edge",
        "Requests enter through the CDN and the API gateway, which terminates TLS and checks rate limits.",
    ),
    (
        "Services",
        "Each service owns its database; services talk over gRPC inside the cluster and never share tables.",
    ),
    ("Messaging", "Asynchronous work goes through Kafka topics with a seven day retention."),
    (
        "Databases",
        "PostgreSQL is the default database; Redis is used only as a cache, never as the source of truth.",
    ),
    ("Search", "Document search uses a BM25 index rebuilt from the document store every night."),
    ("Deployments", "Deploys go through Argo CD; every merge to main is deployed to staging automatically."),
    (
        "Feature flags",
        "Risky changes ship behind feature flags and are rolled out to one percent of users first.",
    ),
    (
        "Observability",
        "Metrics go to Prometheus, traces to Tempo and logs to Loki; dashboards live in Grafana.",
    ),
    (
        "Disaster recovery",
        "The recovery point objective is 15 minutes and the recovery time objective is four hours.",
    ),
    ("Capacity", "Clusters scale on CPU and queue depth; the autoscaler keeps 30 percent headroom."),
    ("Data platform", "The warehouse is loaded nightly from change data capture streams."),
    ("Mobile", "The mobile apps talk to a dedicated gateway that aggregates calls to backend services."),
    ("Identity", "All user logins go through the auth service, which issues short-lived JWTs."),
]

ZH = {
    "zh/handbook/年假.md": (
        "年假制度",
        [
            (
                "年假天数",
                [
                    "正式员工每年享有十五天带薪年假，入职满五年后增加到二十天。",
                    "年假可以分多次使用，但每次至少半天。",
                ],
            ),
            ("申请方式", ["请至少提前两周在人事系统中提交年假申请，并由直属经理审批。"]),
        ],
    ),
    "zh/handbook/报销流程.md": (
        "费用报销流程",
        [
            ("提交时间", ["出差结束后三十天内必须提交报销申请，逾期不予报销。"]),
            ("所需材料", ["报销时需要上传发票原件的照片和行程单。", "超过五千元的报销需要部门总监审批。"]),
        ],
    ),
    "zh/handbook/入职指南.md": (
        "新员工入职指南",
        [
            ("第一天", ["入职第一天请携带身份证和银行卡，到前台领取工牌和笔记本电脑。"]),
            ("导师制度", ["每位新员工都会分配一名导师，帮助你在第一个月熟悉团队和工作流程。"]),
        ],
    ),
    "zh/policies/信息安全.md": (
        "信息安全规定",
        [
            ("密码要求", ["密码长度至少十四位，并且必须开启双因素认证。"]),
            (
                "数据保护",
                ["客户数据严禁存放在个人电脑或私人网盘中。", "发现安全事件请在一小时内报告安全值班人员。"],
            ),
        ],
    ),
    "zh/policies/远程办公.md": (
        "远程办公政策",
        [
            ("适用范围", ["员工每周可以远程办公两天，具体安排由团队负责人确认。"]),
            ("设备补贴", ["公司为远程办公提供一次性五百元的设备补贴，用于购买显示器或椅子。"]),
        ],
    ),
    "zh/engineering/上线流程.md": (
        "代码上线流程",
        [
            ("代码评审", ["所有代码合并前至少需要一位同事评审通过。"]),
            ("发布窗口", ["生产环境发布时间为周一至周四上午十点到下午四点，周五不发布。"]),
        ],
    ),
}

JA = {
    "ja/handbook/有給休暇.md": (
        "有給休暇について",
        [
            (
                "付与日数",
                [
                    "正社員には入社半年後に十日間の有給休暇が付与されます。",
                    "勤続年数に応じて最大二十日まで増えます。",
                ],
            ),
            ("申請方法", ["有給休暇は勤怠システムから一週間前までに申請してください。"]),
        ],
    ),
    "ja/handbook/経費精算.md": (
        "経費精算の手順",
        [
            ("申請期限", ["出張後、三十日以内に経費精算を申請してください。"]),
            (
                "必要書類",
                ["領収書の画像を必ず添付してください。", "一万円を超える接待費は事前承認が必要です。"],
            ),
        ],
    ),
    "ja/handbook/リモートワーク.md": (
        "リモートワーク制度",
        [
            ("勤務場所", ["自宅またはコワーキングスペースでの勤務が認められています。"]),
            ("手当", ["在宅勤務手当として毎月三千円が給与に加算されます。"]),
        ],
    ),
    "ja/policies/情報セキュリティ.md": (
        "情報セキュリティ規程",
        [
            ("パスワード", ["パスワードは十四文字以上とし、二要素認証を必ず有効にしてください。"]),
            ("持ち出し", ["顧客データを私物のパソコンに保存することは禁止されています。"]),
        ],
    ),
    "ja/engineering/障害対応.md": (
        "障害対応の流れ",
        [
            ("初動", ["障害を検知したら、まずオンコール担当者がインシデントチャンネルを開設します。"]),
            ("振り返り", ["障害が収束したら、五営業日以内にポストモーテムを公開します。"]),
        ],
    ),
}

ZH_OFFICES = {"上海": "浦东新区世纪大道100号", "北京": "朝阳区建国路88号", "深圳": "南山区科技园南路1号"}
JA_OFFICES = {"東京": "渋谷区道玄坂一丁目", "大阪": "北区梅田三丁目", "福岡": "博多区博多駅前二丁目"}


def render(title: str, sections: list[tuple[str, list[str]]]) -> str:
    parts = [f"# {title}", ""]
    for heading, sentences in sections:
        parts += [f"## {heading}", "", " ".join(sentences), ""]
    return "\n".join(parts)


def team_files(team: str) -> dict[str, str]:
    lead, channel, service, owns, slo, tool = TEAMS[team]
    base = f"engineering/teams/{team}"
    return {
        f"{base}/overview.md": render(
            f"{team.capitalize()} team",
            [
                (
                    "What we own",
                    [
                        f"The {team} team owns {owns} and the {service} service.",
                        f"Our availability objective for {service} is {slo} per month.",
                    ],
                ),
                (
                    "People",
                    [
                        f"{lead} leads the team.",
                        f"Ask questions in {channel}; we answer within one working day.",
                    ],
                ),
            ],
        ),
        f"{base}/oncall.md": render(
            f"{team.capitalize()} on-call",
            [
                (
                    "Rotation",
                    [
                        f"The {team} on-call rotation changes every Monday at 10:00.",
                        "Each engineer is on call for one week in six.",
                    ],
                ),
                (
                    "Escalation",
                    [
                        f"If the primary does not acknowledge a page for {service} within 15 minutes, "
                        f"it escalates to the secondary and then to {lead}."
                    ],
                ),
                (
                    "Compensation",
                    ["On-call weeks are paid with a flat allowance plus time off for night pages."],
                ),
            ],
        ),
        f"{base}/runbook.md": render(
            f"{service} runbook",
            [
                (
                    "Health checks",
                    [f"The {service} health endpoint is /healthz; it returns 200 when {tool} is reachable."],
                ),
                (
                    "Restarting",
                    [
                        f"Restart {service} with a rolling restart of its deployment; never delete the pods by hand."
                    ],
                ),
                (
                    "Known issues",
                    [f"When {tool} is slow, {service} sheds load and returns 503 with Retry-After."],
                ),
            ],
        ),
        f"{base}/faq.md": render(
            f"{team.capitalize()} FAQ",
            [
                (
                    "Requests",
                    [f"File feature requests for {owns} in the {team} board; we triage them every Tuesday."],
                ),
                (
                    "Access",
                    [f"Read access to {service} dashboards is granted automatically to all engineers."],
                ),
            ],
        ),
    }


def region_files(region: str) -> dict[str, str]:
    city, days, holiday, health, gym = REGIONS[region]
    base = f"policies/regions/{region}"
    return {
        f"{base}/holidays.md": render(
            f"Holidays in {region.capitalize()}",
            [
                (
                    "Annual leave",
                    [f"Employees in the {city} office have {days} days of paid annual leave per year."],
                ),
                ("Public holidays", [f"Local public holidays apply, including {holiday}."]),
            ],
        ),
        f"{base}/benefits.md": render(
            f"Benefits in {region.capitalize()}",
            [
                ("Health", [f"Employees in {region.capitalize()} are covered by {health}."]),
                ("Gym", [f"The monthly gym allowance in {region.capitalize()} is {gym}."]),
            ],
        ),
    }


def incident_file(number: int, service: str, cause: str, fix: str, month: int) -> tuple[str, str]:
    minutes = 20 + (number * 7) % 90
    return f"engineering/incidents/INC-{number}.md", render(
        f"INC-{number}: {service} degraded",
        [
            (
                "Summary",
                [
                    f"On 2026-{month:02d}-{(number % 27) + 1:02d} the {service} service was degraded "
                    f"for {minutes} minutes."
                ],
            ),
            ("Root cause", [f"The root cause was {cause}."]),
            ("Resolution", [f"The on-call engineer {fix}."]),
            (
                "Follow-ups",
                [
                    "Action items are tracked in the incident board and reviewed in the weekly operations meeting."
                ],
            ),
        ],
    )


def travel_policy(year: int, hotel: int, per_diem: int) -> str:
    return render(
        f"Travel policy {year}",
        [
            (
                "Booking",
                [
                    "Book flights and hotels through the travel portal at least 14 days ahead.",
                    "Economy class is the default; business class is allowed for flights longer than eight hours.",
                ],
            ),
            ("Hotels", [f"The hotel limit is {hotel} euros per night in major cities."]),
            ("Per diem", [f"The daily meal allowance while travelling is {per_diem} euros."]),
        ],
    )


def meeting_note(index: int) -> tuple[str, str]:
    topics = [
        "pricing page redesign",
        "mobile onboarding flow",
        "search relevance",
        "invoice emails",
        "enterprise SSO",
        "usage-based billing",
        "dark mode",
        "data export",
    ]
    topic = topics[index % len(topics)]
    week = index + 1
    return f"product/meetings/2026-week-{week:02d}.md", render(
        f"Product sync, week {week}",
        [
            ("Attendees", ["Product, design and the engineering leads of the affected teams."]),
            (
                "Decisions",
                [f"We agreed to continue the {topic} work and review the metrics again in two weeks."],
            ),
            ("Open questions", [f"Who owns the rollout plan for the {topic} change is still open."]),
        ],
    )


def golden_corpus() -> dict[str, str]:
    files: dict[str, str] = {}
    for path, (title, sections) in {**HANDBOOK, **POLICIES, **ZH, **JA}.items():
        files[path] = render(title, sections)
    for team in TEAMS:
        files.update(team_files(team))
    for region in REGIONS:
        files.update(region_files(region))
    for index in range(60):
        service, cause, fix = SERVICES[index % len(SERVICES)]
        path, text = incident_file(
            1000 + index,
            service,
            cause if index < len(SERVICES) else f"a repeat of {cause}",
            fix,
            (index % 12) + 1,
        )
        files[path] = text
    files["policies/travel/travel-policy-2025.md"] = travel_policy(2025, 180, 45)
    files["policies/travel/travel-policy-2026.md"] = travel_policy(2026, 210, 50)
    files["security/security-standard.md"] = render(
        "Information security standard",
        [(h, [s, f"Exceptions to the {h.lower()} rule need CISO approval."]) for h, s in SECURITY_STANDARD],
    )
    files["engineering/architecture.md"] = render(
        "Architecture guide",
        [(h, [s, f"Questions about {h.lower()} go to the architecture forum."]) for h, s in ARCHITECTURE],
    )
    for index in range(80):
        path, text = meeting_note(index)
        files[path] = text
    for office, address in ZH_OFFICES.items():
        files[f"zh/offices/{office}.md"] = render(
            f"{office}办公室",
            [
                ("地址", [f"{office}办公室位于{address}。"]),
                ("门禁", [f"{office}办公室工作日早上八点开放，晚上十点关闭。"]),
            ],
        )
    for office, address in JA_OFFICES.items():
        files[f"ja/offices/{office}.md"] = render(
            f"{office}オフィス",
            [
                ("所在地", [f"{office}オフィスは{address}にあります。"]),
                ("入館", [f"{office}オフィスは平日の朝八時から夜十時まで入館できます。"]),
            ],
        )
    for folder in ("handbook", "policies", "engineering", "security", "product", "zh", "ja"):
        files[f"{folder}/README.md"] = render(
            f"About the {folder} folder",
            [
                ("Purpose", [f"This folder holds the {folder} documents of Northwind."]),
                ("Owners", ["Changes go through a pull request reviewed by the folder owners."]),
            ],
        )
    return files


def bulk_corpus(copies: int) -> dict[str, str]:
    """The benchmark's corpora: the generated families again under `bulk-<i>/`, with the
    copy number in the text so files differ."""
    files = dict(golden_corpus())
    i = 0
    while len(files) < copies:
        for path, text in golden_corpus().items():
            if len(files) >= copies:
                break
            files[f"bulk-{i}/{path}"] = text.replace("Northwind", f"Northwind unit {i}", 1) + (
                f"\nRevision {i} of this page was reviewed by the documentation team.\n"
            )
        i += 1
    return files


def write(out: Path, files: dict[str, str]) -> None:
    if out.exists():
        shutil.rmtree(out)
    for path, text in sorted(files.items()):
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent.parent / "tests" / "corpus"
    )
    parser.add_argument("--files", type=int, default=0, help="write this many files (benchmark corpora)")
    args = parser.parse_args()
    files = bulk_corpus(args.files) if args.files else golden_corpus()
    write(args.out, files)
    print(f"wrote {len(files)} files to {args.out}")


if __name__ == "__main__":
    main()
