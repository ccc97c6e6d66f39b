use super::*;

fn yaml<T: Serialize>(value: &T) -> String {
    serde_norway::to_string(value).unwrap()
}

#[test]
fn decimals_are_written_as_numbers_when_they_read_back_exactly_and_as_text_otherwise() {
    let write = |text: &str| yaml(&DecimalDoc(Decimal::from_str(text).unwrap()));
    assert_eq!(write("500"), "500\n");
    assert_eq!(write("500.00"), "500\n");
    assert_eq!(write("0.01"), "0.01\n");
    assert_eq!(
        write("0.10000000000000000001"),
        "'0.10000000000000000001'\n"
    );
    for text in [
        "500",
        "0.01",
        "-3.5",
        "0.10000000000000000001",
        "500.0000001",
    ] {
        let written = write(text);
        let back: DecimalDoc = serde_norway::from_str(&written).unwrap();
        assert_eq!(
            back.0,
            Decimal::from_str(text).unwrap(),
            "{text} → {written}"
        );
    }
    let plain: DecimalDoc = serde_norway::from_str("500.0000001").unwrap();
    assert_eq!(plain.0.to_string(), "500.0000001");
    assert!(serde_norway::from_str::<DecimalDoc>("lots").is_err());
}

#[test]
fn json_numbers_keep_their_literal_through_yaml() {
    let value: Value = serde_json::from_str(
        r#"{"a":1,"b":1.0,"c":-7,"d":0.01,"e":1e-9,"f":18446744073709551615,
                "g":5.10,"h":1e-06,"i":1E2,"j":-0,"k":123456789012345678901234567890,
                "l":[true,null,"x",{"m":2.50}]}"#,
    )
    .unwrap();
    let text = yaml(&JsonValue(value.clone()));
    let back: JsonValue = serde_norway::from_str(&text).unwrap();
    assert_eq!(
        crate::audit::canonical_json(&back.0),
        crate::audit::canonical_json(&value),
        "{text}"
    );
    assert!(text.contains("g: !number '5.10'"), "{text}");
    assert!(
        text.contains("d: 0.01\n"),
        "plain where YAML reads it back: {text}"
    );
}

#[test]
fn skill_frontmatter_with_numbers_reads_back_unchanged() {
    let mut skill = Skill::from(&SkillDoc {
        slug: Slug::parse("s").unwrap(),
        description: "d".into(),
        instructions: "i".into(),
        tools: Vec::new(),
        resources: Vec::new(),
        frontmatter: BTreeMap::new(),
    });
    skill.frontmatter_extra =
        serde_json::from_str(r#"{"license":"MIT","metadata":{"version":2,"weight":0.5}}"#).unwrap();
    let text = yaml(&SkillDoc::from(&skill));
    let back: SkillDoc = serde_norway::from_str(&text).unwrap();
    assert_eq!(Skill::from(&back), skill, "{text}");
}

#[test]
fn multi_line_text_is_a_block_scalar() {
    let text = yaml(&ResourceDoc {
        name: Slug::parse("policy").unwrap(),
        title: "Policy".into(),
        content: "Line one.\nLine two.\n".into(),
    });
    assert!(
        text.contains("content: |\n  Line one.\n  Line two.\n"),
        "{text}"
    );
}

#[test]
fn every_demo_limit_converts_to_the_document_and_back_unchanged() {
    let demo = crate::demo::catalog::demo_catalog();
    let limits = demo
        .roles
        .iter()
        .flat_map(|r| r.limits.iter())
        .chain(demo.scopes.iter().flat_map(|s| s.guardrails.iter()));
    let mut seen = 0;
    for limit in limits {
        let doc = LimitDoc::from(limit);
        let text = yaml(&doc);
        let parsed: LimitDoc = serde_norway::from_str(&text).unwrap();
        assert_eq!(parsed.to_limit().as_ref(), Ok(limit), "{text}");
        seen += 1;
    }
    assert!(seen >= 6, "the demo has limits of every kind");
}

#[test]
fn a_fleet_rule_converts_to_the_document_and_back_unchanged() {
    for limit in [
        Limit::ArgRule {
            tools: "*".into(),
            name: Some("*url*".into()),
            format: Some("uri".into()),
            check: ArgCheck::UrlHost {
                hosts: vec!["*".into()],
            },
        },
        Limit::ArgRule {
            tools: "crm_*".into(),
            name: None,
            format: Some("email".into()),
            check: ArgCheck::MaxLength { max: 254 },
        },
    ] {
        let doc = LimitDoc::from(&limit);
        let text = yaml(&doc);
        assert!(text.contains("kind: arg_rule"), "{text}");
        let parsed: LimitDoc = serde_norway::from_str(&text).unwrap();
        assert_eq!(parsed.to_limit(), Ok(limit), "{text}");
    }
}

#[test]
fn each_limit_kind_refuses_the_fields_of_others_and_names_those_it_misses() {
    let all = |kind, check| LimitDoc {
        kind,
        tool: "t".into(),
        arg: Some("a".into()),
        name: Some("*url*".into()),
        format: Some("uri".into()),
        check,
        op: Some(CmpOp::Le),
        value: Some(DecimalDoc(1.into())),
        values: Some(Vec::new()),
        root: Some("/srv".into()),
        hosts: Some(vec!["example.com".into()]),
        max: Some(DecimalDoc(1.into())),
        after: Some(Vec::new()),
        same_args: Some(Vec::new()),
        result: Some(ResultDoc {
            pointer: "/ok".into(),
            equals: JsonValue(Value::Bool(true)),
        }),
        when: Some(WhenDoc {
            arg: "a".into(),
            op: CmpOp::Le,
            value: DecimalDoc(1.into()),
        }),
        expires_in_minutes: Some(5),
    };
    let bare = |kind, check| LimitDoc {
        kind,
        check,
        tool: "t".into(),
        ..LimitDoc::default()
    };
    let fields = |doc: LimitDoc| -> Vec<&'static str> {
        doc.to_limit()
            .err()
            .unwrap_or_default()
            .iter()
            .map(|e| e.field)
            .collect()
    };
    use CheckDoc::{Compare, MaxLength, NoShell, OneOf, PathUnder, UrlHost};
    use LimitKind::*;
    // The kind and check, the fields refused when every field is set, and the fields
    // named missing when none is.
    let cases = [
        (
            ArgBound,
            Some(Compare),
            "name format values root hosts max after same_args result when expires_in_minutes",
            "arg op value",
        ),
        (
            ArgBound,
            Some(OneOf),
            "name format op value root hosts max after same_args result when expires_in_minutes",
            "arg values",
        ),
        (
            ArgBound,
            Some(MaxLength),
            "name format op value values root hosts after same_args result when expires_in_minutes",
            "arg max",
        ),
        (
            ArgBound,
            Some(NoShell),
            "name format op value values root hosts max after same_args result when expires_in_minutes",
            "arg",
        ),
        (
            ArgBound,
            Some(PathUnder),
            "name format op value values hosts max after same_args result when expires_in_minutes",
            "arg root",
        ),
        (
            ArgBound,
            Some(UrlHost),
            "name format op value values root max after same_args result when expires_in_minutes",
            "arg hosts",
        ),
        (
            ArgBound,
            None,
            "name format values root hosts max after same_args result when expires_in_minutes check",
            "arg check",
        ),
        (
            SumCap,
            None,
            "name format op value values root hosts after same_args result when expires_in_minutes",
            "arg max",
        ),
        (
            CountCap,
            None,
            "arg name format op value values root hosts after same_args result when expires_in_minutes",
            "max",
        ),
        (
            Requires,
            None,
            "arg name format op value values root hosts max when expires_in_minutes",
            "after",
        ),
        (
            RequiresApproval,
            None,
            "arg name format op value values root hosts max after same_args result",
            "",
        ),
        (
            ArgRule,
            Some(Compare),
            "arg values root hosts max after same_args result when expires_in_minutes",
            "op value",
        ),
        (
            ArgRule,
            Some(NoShell),
            "arg op value values root hosts max after same_args result when expires_in_minutes",
            "",
        ),
    ];
    for (kind, check, refused, missing) in cases {
        let refused: Vec<&str> = refused.split_whitespace().collect();
        let missing: Vec<&str> = missing.split_whitespace().collect();
        assert_eq!(
            fields(all(kind, check)),
            refused,
            "{kind:?} {check:?}, every field"
        );
        assert_eq!(
            fields(bare(kind, check)),
            missing,
            "{kind:?} {check:?}, no field"
        );
    }
}

#[test]
fn a_limit_field_of_another_kind_or_a_missing_one_is_named() {
    let doc = LimitDoc {
        kind: LimitKind::SumCap,
        tool: "process_refund".into(),
        after: Some(vec!["x".into()]),
        ..LimitDoc::default()
    };
    let errors = doc.to_limit().unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field).collect();
    assert_eq!(fields, ["after", "arg", "max"], "{errors:?}");
    let fractional = LimitDoc {
        kind: LimitKind::CountCap,
        tool: "t".into(),
        max: Some(DecimalDoc(Decimal::from_str("2.5").unwrap())),
        ..LimitDoc::default()
    };
    assert_eq!(fractional.to_limit().unwrap_err()[0].field, "max");
}
