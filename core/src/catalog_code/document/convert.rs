//! The conversions between the catalog document and the model, both ways, and the
//! field-by-field checks a document's limits, roles, scopes and upstreams pass on the way
//! in. A child of `document` so it reads the document's private helpers.

use super::*;

// ---- model → document ----

impl From<&Upstream> for UpstreamDoc {
    fn from(upstream: &Upstream) -> Self {
        let mut doc = UpstreamDoc {
            name: upstream.name.clone(),
            transport: TransportDoc::Stdio,
            command: None,
            args: Vec::new(),
            url: None,
            ca_bundle: None,
            allow_plaintext: false,
        };
        match &upstream.kind {
            UpstreamKind::Stdio { command, args } => {
                doc.command = Some(command.clone());
                doc.args = args.clone();
            }
            UpstreamKind::Http {
                url,
                ca_bundle,
                allow_plaintext,
            } => {
                doc.transport = TransportDoc::Http;
                doc.url = Some(url.clone());
                doc.ca_bundle = ca_bundle.clone();
                doc.allow_plaintext = *allow_plaintext;
            }
            // Never exported: the built-in upstream is part of the binary.
            UpstreamKind::Builtin => {}
        }
        doc
    }
}

impl ToolDoc {
    pub fn from_spec(upstream: &Slug, spec: &ToolSpec) -> Self {
        ToolDoc {
            name: spec.name.clone(),
            upstream: upstream.clone(),
            description: spec.description.clone(),
            input_schema: JsonValue(spec.input_schema.clone()),
            output_schema: spec.output_schema.clone().map(JsonValue),
            annotations: spec.annotations.clone().map(JsonValue),
            sensitive_args: spec.sensitive_args.clone(),
            pin: Some(spec.pin()),
        }
    }

    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.0.clone(),
            output_schema: self.output_schema.as_ref().map(|v| v.0.clone()),
            annotations: self.annotations.as_ref().map(|v| v.0.clone()),
            sensitive_args: self.sensitive_args.clone(),
        }
    }
}

impl From<&Skill> for SkillDoc {
    fn from(skill: &Skill) -> Self {
        SkillDoc {
            slug: skill.slug.clone(),
            description: skill.description.clone(),
            instructions: skill.instructions.clone(),
            tools: skill.tools.clone(),
            resources: skill.resources.iter().map(ResourceDoc::from).collect(),
            frontmatter: skill
                .frontmatter_extra
                .iter()
                .map(|(k, v)| (k.clone(), JsonValue(v.clone())))
                .collect(),
        }
    }
}

impl From<&SkillDoc> for Skill {
    fn from(doc: &SkillDoc) -> Self {
        Skill {
            slug: doc.slug.clone(),
            description: doc.description.clone(),
            instructions: doc.instructions.clone(),
            tools: doc.tools.clone(),
            resources: doc.resources.iter().map(Resource::from).collect(),
            frontmatter_extra: doc
                .frontmatter
                .iter()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
        }
    }
}

impl From<&Resource> for ResourceDoc {
    fn from(r: &Resource) -> Self {
        let (name, title, content) = (r.name.clone(), r.title.clone(), r.content.clone());
        ResourceDoc {
            name,
            title,
            content,
        }
    }
}

impl From<&ResourceDoc> for Resource {
    fn from(r: &ResourceDoc) -> Self {
        let (name, title, content) = (r.name.clone(), r.title.clone(), r.content.clone());
        Resource {
            name,
            title,
            content,
        }
    }
}

impl From<&Role> for RoleDoc {
    fn from(role: &Role) -> Self {
        RoleDoc {
            slug: role.slug.clone(),
            title: role.title.clone(),
            description: role.description.clone(),
            instructions: role.instructions.clone(),
            skills: role.skills.clone(),
            limits: role.limits.iter().map(LimitDoc::from).collect(),
        }
    }
}

impl From<&Scope> for ScopeDoc {
    fn from(scope: &Scope) -> Self {
        ScopeDoc {
            slug: scope.slug.clone(),
            description: scope.description.clone(),
            roles: scope.roles.clone(),
            guardrails: scope.guardrails.iter().map(LimitDoc::from).collect(),
        }
    }
}

impl From<&ResultCheck> for ResultDoc {
    fn from(check: &ResultCheck) -> Self {
        ResultDoc {
            pointer: check.pointer.clone(),
            equals: JsonValue(check.equals.clone()),
        }
    }
}

impl From<&ResultDoc> for ResultCheck {
    fn from(doc: &ResultDoc) -> Self {
        ResultCheck {
            pointer: doc.pointer.clone(),
            equals: doc.equals.0.clone(),
        }
    }
}

impl From<&ApprovalCondition> for WhenDoc {
    fn from(when: &ApprovalCondition) -> Self {
        WhenDoc {
            arg: when.arg.clone(),
            op: when.op,
            value: DecimalDoc(when.value),
        }
    }
}

impl From<&WhenDoc> for ApprovalCondition {
    fn from(doc: &WhenDoc) -> Self {
        ApprovalCondition {
            arg: doc.arg.clone(),
            op: doc.op,
            value: doc.value.0,
        }
    }
}

impl From<&Limit> for LimitDoc {
    fn from(limit: &Limit) -> Self {
        let mut doc = LimitDoc {
            tool: limit.tool().to_owned(),
            ..LimitDoc::default()
        };
        match limit {
            Limit::ArgBound { arg, check, .. } => {
                doc.kind = LimitKind::ArgBound;
                doc.arg = Some(arg.clone());
                doc.set_check(check);
            }
            Limit::ArgRule {
                name,
                format,
                check,
                ..
            } => {
                doc.kind = LimitKind::ArgRule;
                doc.name = name.clone();
                doc.format = format.clone();
                doc.set_check(check);
            }
            Limit::SumCap { arg, max, .. } => {
                doc.kind = LimitKind::SumCap;
                doc.arg = Some(arg.clone());
                doc.max = Some(DecimalDoc(*max));
            }
            Limit::CountCap { max, .. } => {
                doc.kind = LimitKind::CountCap;
                doc.max = Some(DecimalDoc((*max).into()));
            }
            Limit::Requires {
                after,
                same_args,
                result,
                ..
            } => {
                doc.kind = LimitKind::Requires;
                doc.after = Some(after.clone());
                doc.same_args = (!same_args.is_empty()).then(|| same_args.clone());
                doc.result = result.as_ref().map(ResultDoc::from);
            }
            Limit::RequiresApproval {
                when,
                expires_in_minutes,
                ..
            } => {
                doc.kind = LimitKind::RequiresApproval;
                doc.when = when.as_ref().map(WhenDoc::from);
                doc.expires_in_minutes = *expires_in_minutes;
            }
        }
        doc
    }
}

impl LimitDoc {
    /// The fields of `check` (an `arg_bound`'s or an `arg_rule`'s).
    fn set_check(&mut self, check: &ArgCheck) {
        match check {
            ArgCheck::Compare { op, value } => {
                self.check = Some(CheckDoc::Compare);
                self.op = Some(*op);
                self.value = Some(DecimalDoc(*value));
            }
            ArgCheck::OneOf { values } => {
                self.check = Some(CheckDoc::OneOf);
                self.values = Some(values.iter().cloned().map(JsonValue).collect());
            }
            ArgCheck::MaxLength { max } => {
                self.check = Some(CheckDoc::MaxLength);
                self.max = Some(DecimalDoc((*max as u64).into()));
            }
            ArgCheck::NoShell => self.check = Some(CheckDoc::NoShell),
            ArgCheck::PathUnder { root } => {
                self.check = Some(CheckDoc::PathUnder);
                self.root = Some(root.clone());
            }
            ArgCheck::UrlHost { hosts } => {
                self.check = Some(CheckDoc::UrlHost);
                self.hosts = Some(hosts.clone());
            }
        }
    }
}

// ---- document → model ----

/// A field of a limit that is wrong for its kind: the field's name and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: &'static str,
    pub message: String,
}

fn field_error(field: &'static str, message: impl Into<String>) -> FieldError {
    FieldError {
        field,
        message: message.into(),
    }
}

/// The model's limits of `docs`: those that convert, and the errors of the others with
/// their index (a role with a bad limit still names a role, so the rest of the file is
/// checked against it).
pub fn to_limits(docs: &[LimitDoc]) -> (Vec<Limit>, Vec<(usize, FieldError)>) {
    let mut errors = Vec::new();
    let limits = docs
        .iter()
        .enumerate()
        .filter_map(|(j, doc)| match doc.to_limit() {
            Ok(limit) => Some(limit),
            Err(wrong) => {
                errors.extend(wrong.into_iter().map(|e| (j, e)));
                None
            }
        })
        .collect();
    (limits, errors)
}

impl RoleDoc {
    /// The model's role, with the limits that convert (see [`to_limits`]).
    pub fn to_role(&self) -> (Role, Vec<(usize, FieldError)>) {
        let (limits, errors) = to_limits(&self.limits);
        let role = Role {
            slug: self.slug.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            instructions: self.instructions.clone(),
            skills: self.skills.clone(),
            limits,
        };
        (role, errors)
    }
}

impl ScopeDoc {
    /// The model's scope, with the guardrails that convert (see [`to_limits`]).
    pub fn to_scope(&self) -> (Scope, Vec<(usize, FieldError)>) {
        let (guardrails, errors) = to_limits(&self.guardrails);
        let scope = Scope {
            slug: self.slug.clone(),
            description: self.description.clone(),
            roles: self.roles.clone(),
            guardrails,
        };
        (scope, errors)
    }
}

impl LimitKind {
    /// The fields a limit of this kind needs (in the order their absence is reported) and
    /// those it may have besides; an `arg_bound` limit's depend on its `check`.
    fn fields(self, check: Option<CheckDoc>) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            LimitKind::ArgBound => match check {
                Some(CheckDoc::Compare) => (&["arg", "check", "op", "value"], &[]),
                Some(CheckDoc::OneOf) => (&["arg", "check", "values"], &[]),
                Some(CheckDoc::MaxLength) => (&["arg", "check", "max"], &[]),
                Some(CheckDoc::NoShell) => (&["arg", "check"], &[]),
                Some(CheckDoc::PathUnder) => (&["arg", "check", "root"], &[]),
                Some(CheckDoc::UrlHost) => (&["arg", "check", "hosts"], &[]),
                None => (&["arg", "check"], &["op", "value"]),
            },
            LimitKind::ArgRule => match check {
                Some(CheckDoc::Compare) => (&["check", "op", "value"], &["name", "format"]),
                Some(CheckDoc::OneOf) => (&["check", "values"], &["name", "format"]),
                Some(CheckDoc::MaxLength) => (&["check", "max"], &["name", "format"]),
                Some(CheckDoc::NoShell) => (&["check"], &["name", "format"]),
                Some(CheckDoc::PathUnder) => (&["check", "root"], &["name", "format"]),
                Some(CheckDoc::UrlHost) => (&["check", "hosts"], &["name", "format"]),
                None => (&["check"], &["name", "format", "op", "value"]),
            },
            LimitKind::SumCap => (&["arg", "max"], &[]),
            LimitKind::CountCap => (&["max"], &[]),
            LimitKind::Requires => (&["after"], &["same_args", "result"]),
            LimitKind::RequiresApproval => (&[], &["when", "expires_in_minutes"]),
        }
    }
}

impl LimitDoc {
    /// The model's limit, or every field that is missing or does not belong to its kind.
    pub fn to_limit(&self) -> Result<Limit, Vec<FieldError>> {
        let kind = self.kind;
        let name = serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let present = [
            ("arg", self.arg.is_some()),
            ("name", self.name.is_some()),
            ("format", self.format.is_some()),
            ("check", self.check.is_some()),
            ("op", self.op.is_some()),
            ("value", self.value.is_some()),
            ("values", self.values.is_some()),
            ("root", self.root.is_some()),
            ("hosts", self.hosts.is_some()),
            ("max", self.max.is_some()),
            ("after", self.after.is_some()),
            ("same_args", self.same_args.is_some()),
            ("result", self.result.is_some()),
            ("when", self.when.is_some()),
            ("expires_in_minutes", self.expires_in_minutes.is_some()),
        ];
        let (needed, optional) = kind.fields(self.check);
        let mut errors: Vec<FieldError> = present
            .iter()
            .filter(|&&(field, set)| set && !needed.contains(&field) && !optional.contains(&field))
            .map(|&(field, _)| field_error(field, format!("a `{name}` limit has no `{field}`")))
            .collect();
        errors.extend(
            needed
                .iter()
                .filter(|&&field| !present.contains(&(field, true)))
                .map(|&field| {
                    field_error(field, format!("missing: a `{name}` limit needs `{field}`"))
                }),
        );
        let whole = |max: DecimalDoc| -> Result<u64, FieldError> {
            let d = max.0.normalize();
            if d.fract().is_zero() && !d.is_sign_negative() {
                u64::try_from(d).map_err(|_| field_error("max", "too large"))
            } else {
                Err(field_error(
                    "max",
                    format!("`{d}` is not a whole number of at least 0"),
                ))
            }
        };
        let mut count = |max: Option<DecimalDoc>| -> u64 {
            match max.map(whole) {
                Some(Ok(n)) => n,
                Some(Err(e)) => {
                    errors.push(e);
                    0
                }
                None => 0,
            }
        };
        let tool = self.tool.clone();
        let arg = self.arg.clone().unwrap_or_default();
        let mut check = || match self.check {
            Some(CheckDoc::OneOf) => ArgCheck::OneOf {
                values: self.values.iter().flatten().map(|v| v.0.clone()).collect(),
            },
            Some(CheckDoc::MaxLength) => ArgCheck::MaxLength {
                max: usize::try_from(count(self.max)).unwrap_or(usize::MAX),
            },
            Some(CheckDoc::NoShell) => ArgCheck::NoShell,
            Some(CheckDoc::PathUnder) => ArgCheck::PathUnder {
                root: self.root.clone().unwrap_or_default(),
            },
            Some(CheckDoc::UrlHost) => ArgCheck::UrlHost {
                hosts: self.hosts.clone().unwrap_or_default(),
            },
            _ => ArgCheck::Compare {
                op: self.op.unwrap_or(CmpOp::Le),
                value: self.value.map(|v| v.0).unwrap_or_default(),
            },
        };
        let limit = match kind {
            LimitKind::ArgBound => Limit::ArgBound {
                tool,
                arg,
                check: check(),
            },
            LimitKind::ArgRule => Limit::ArgRule {
                tools: tool,
                name: self.name.clone(),
                format: self.format.clone(),
                check: check(),
            },
            LimitKind::SumCap => Limit::SumCap {
                tool,
                arg,
                max: self.max.map(|v| v.0).unwrap_or_default(),
            },
            LimitKind::CountCap => {
                let n = count(self.max);
                Limit::CountCap {
                    tool,
                    max: u32::try_from(n).unwrap_or_else(|_| {
                        errors.push(field_error("max", "at most 4294967295 calls"));
                        0
                    }),
                }
            }
            LimitKind::Requires => Limit::Requires {
                tool,
                after: self.after.clone().unwrap_or_default(),
                same_args: self.same_args.clone().unwrap_or_default(),
                result: self.result.as_ref().map(ResultCheck::from),
            },
            LimitKind::RequiresApproval => Limit::RequiresApproval {
                tool,
                when: self.when.as_ref().map(ApprovalCondition::from),
                expires_in_minutes: self.expires_in_minutes,
            },
        };
        if errors.is_empty() {
            Ok(limit)
        } else {
            Err(errors)
        }
    }
}

impl UpstreamDoc {
    /// The model's upstream, or the fields that are missing or wrong for its transport.
    pub fn to_upstream(&self) -> Result<Upstream, Vec<FieldError>> {
        let mut errors = Vec::new();
        let kind = match self.transport {
            TransportDoc::Stdio => {
                if self.url.is_some() {
                    errors.push(field_error("url", "a stdio upstream has no `url`"));
                }
                if self.ca_bundle.is_some() {
                    errors.push(field_error(
                        "ca_bundle",
                        "a stdio upstream has no `ca_bundle`",
                    ));
                }
                if self.allow_plaintext {
                    errors.push(field_error(
                        "allow_plaintext",
                        "a stdio upstream has no `allow_plaintext`",
                    ));
                }
                match self.command.as_deref().map(str::trim) {
                    Some(command) if !command.is_empty() => {}
                    _ => errors.push(field_error(
                        "command",
                        "missing: a stdio upstream needs a `command`",
                    )),
                }
                UpstreamKind::Stdio {
                    command: self.command.clone().unwrap_or_default(),
                    args: self.args.clone(),
                }
            }
            TransportDoc::Http => {
                if self.command.is_some() {
                    errors.push(field_error("command", "an http upstream has no `command`"));
                }
                if !self.args.is_empty() {
                    errors.push(field_error("args", "an http upstream has no `args`"));
                }
                let url = self.url.clone().unwrap_or_default();
                if let Err(reason) = check_upstream_url(&url, self.allow_plaintext) {
                    errors.push(field_error("url", reason));
                }
                if let Some(Err(reason)) = self.ca_bundle.as_deref().map(parse_ca_bundle) {
                    errors.push(field_error("ca_bundle", reason));
                }
                UpstreamKind::Http {
                    url,
                    ca_bundle: self.ca_bundle.clone(),
                    allow_plaintext: self.allow_plaintext,
                }
            }
        };
        if errors.is_empty() {
            Ok(Upstream {
                name: self.name.clone(),
                kind,
            })
        } else {
            Err(errors)
        }
    }
}
