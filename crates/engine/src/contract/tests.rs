//! The decoder's own paths: keys guessed from the last document's order or read in full,
//! strings borrowed from the body or decoded from their escapes, and the 4xx a malformed
//! body gets on either path. tests/api/test_wire_schema.py holds the whole decoder to the
//! wire's schema on generated pages; these pin the cases each path must agree on.

use std::borrow::Cow;

use super::{decode, decode_body, FieldError, Limits, Request};

const LIMITS: Limits = Limits {
    max_documents: 1000,
    max_text_chars: 100_000,
};

/// Decoded and type-checked (a page may repeat an id: the page checks do not run).
fn ok(body: &str) -> Request<'_> {
    match decode_body(body.as_bytes()) {
        Ok(d) => d.request,
        Err(e) => panic!("refused {body}: {e:?}"),
    }
}

fn refused(body: &[u8]) -> (u16, String, String) {
    match decode(body, &LIMITS) {
        Ok(r) => panic!("decoded {:?}: {r:?}", String::from_utf8_lossy(body)),
        Err(FieldError {
            status,
            field,
            problem,
        }) => (status, field, problem),
    }
}

fn page(docs: &[&str]) -> String {
    format!("{{\"documents\":[{}]}}", docs.join(","))
}

const FULL: &str = r#"{"id":"a","url":"http://a.example/","score":2.5,"factors":{"text":1,"link":0.5},"spam_score":0.25,"adult_score":0,"domain_age_days":30,"is_ad":true,"topics":["news"],"blocked_regions":["de"],"text":"t","minhash":{"values":[1,2],"shingles":3,"width":2,"seed":7},"attributes":{"k":[1,"x"]}}"#;

/// The same document's fields in another order, with spaces and an escaped key.
const SHUFFLED: &str = r#"{ "attributes" : {"k":[1,"x"]}, "minhash":{"seed":7,"values":[1,2],"shingles":3,"width":2},"text":"t","blocked_regions":["de"],"topics":["news"],"is_ad":true,"domain_age_days":30,"adult_score":0,"spam_score":0.25,"factors":{"text":1,"link":0.5},"sc\u006fre":2.5,"url":"http://a.example/","id":"a"}"#;

#[test]
fn keys_in_any_order_decode_alike() {
    let one = page(&[FULL]);
    let want = ok(&one).documents.remove(0);
    assert_eq!(want.id, "a");
    assert_eq!(
        want.factors,
        vec![("text".into(), 1.0), ("link".into(), 0.5)]
    );
    assert_eq!(&*want.attributes, r#"{"k":[1,"x"]}"#);
    // Each order after each other: every guess is right, wrong, or wrong then right.
    for docs in [
        vec![FULL, FULL, FULL],
        vec![SHUFFLED, SHUFFLED],
        vec![FULL, SHUFFLED, FULL, SHUFFLED],
        vec![SHUFFLED, FULL, FULL],
    ] {
        let body = page(&docs);
        let got = ok(&body).documents;
        assert_eq!(got.len(), docs.len());
        for (i, d) in got.iter().enumerate() {
            assert_eq!(*d, want, "document {i} of {body}");
        }
    }
}

#[test]
fn a_document_of_the_required_fields_alone_follows_a_full_one() {
    let body = page(&[FULL, r#"{"id":"b","url":"u","score":1}"#, FULL]);
    let got = ok(&body).documents;
    assert_eq!(got[1].id, "b");
    assert_eq!(got[1].given, 0);
    assert_eq!(&*got[1].attributes, "{}");
    assert_eq!(got[2].given, got[0].given);
}

#[test]
fn plain_strings_borrow_the_body_and_escaped_ones_are_decoded() {
    let body = page(&[
        r#"{"id":"plain","url":"http://a.example/","score":1,"topics":["t"]}"#,
        r#"{"id":"new\nline \"q\" \\ \/","url":"http://\u00e9.example/","score":1,"topics":["caf\u00e9","😀 \ud83d\ude00"]}"#,
    ]);
    let req = ok(&body);
    let [plain, escaped] = &req.documents[..] else {
        panic!("two documents")
    };
    assert!(matches!(plain.id, Cow::Borrowed(_)));
    assert!(matches!(plain.url, Cow::Borrowed(_)));
    assert!(matches!(plain.topics[0], Cow::Borrowed(_)));
    assert_eq!(escaped.id, "new\nline \"q\" \\ /");
    assert!(matches!(escaped.id, Cow::Owned(_)));
    assert_eq!(escaped.url, "http://é.example/");
    assert_eq!(escaped.topics, vec!["café", "😀 😀"]);
}

#[test]
fn a_key_the_guess_almost_matches_is_read_in_full() {
    // `"url"` is the guess after `id`: a longer key, the key with a space before its colon
    // and the key spelled with an escape are not it, or are it only when read in full.
    assert_eq!(
        refused(page(&[r#"{"id":"a","urlx":"u","score":1}"#]).as_bytes()),
        (422, "documents[0].urlx".into(), "unknown field".into())
    );
    for body in [
        page(&[r#"{"id":"a","url" :"u","score":1}"#]),
        page(&[r#"{"id":"a","\u0075rl":"u","score":1}"#]),
    ] {
        assert_eq!(ok(&body).documents[0].url, "u", "{body}");
    }
    assert_eq!(
        refused(page(&[r#"{"id":"a","URL":"u","score":1}"#]).as_bytes()),
        (422, "documents[0].URL".into(), "unknown field".into())
    );
}

#[test]
fn malformed_documents_are_refused_naming_the_field_on_either_path() {
    type Case<'c> = (&'c [u8], (u16, &'c str, &'c str));
    let cases: [Case; 8] = [
        (
            br#"{"documents":[{"id":"a","url":5,"score":1}]}"#,
            (422, "documents[0].url", "expected a string, got a number"),
        ),
        (
            br#"{"documents":[{"id":"a","url":"u","score":1},{"url":"v","score":1}]}"#,
            (422, "documents[1].id", "required field is missing"),
        ),
        (
            br#"{"documents":[{"id":"a","url":"u","score":1},{"id":"b","url":"v","score":"1"}]}"#,
            (422, "documents[1].score", "expected a number, got a string"),
        ),
        (
            br#"{"documents":[{"id" "a"}]}"#,
            (400, "body", "not valid JSON: expected ':' at byte 20"),
        ),
        (
            br#"{"documents":[{"id"#,
            (
                400,
                "body",
                "not valid JSON: the body ends in the middle of a value",
            ),
        ),
        (
            b"{\"documents\":[{\"id\":\"a\xff\",\"url\":\"u\",\"score\":1}]}",
            (400, "body", "not valid JSON: a string is not valid UTF-8"),
        ),
        (
            br#"{"documents":[{"id":"a","url":"u\x","score":1}]}"#,
            (
                400,
                "body",
                "not valid JSON: invalid escape character in string at byte 34",
            ),
        ),
        (
            br#"{"documents":[{"id":"a","url":"\ud800","score":1}]}"#,
            (
                400,
                "body",
                "not valid JSON: unexpected end of escaped utf-16 surrogate pair at byte 37",
            ),
        ),
    ];
    for (body, (status, field, problem)) in cases {
        assert_eq!(
            refused(body),
            (status, field.into(), problem.into()),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn an_unknown_key_after_a_guess_is_named_as_sent() {
    let body = page(&[
        FULL,
        r#"{"id":"b","url":"u","score":1,"spam_scor\u0065s":1}"#,
    ]);
    assert_eq!(
        refused(body.as_bytes()),
        (
            422,
            "documents[1].spam_scores".into(),
            "unknown field".into()
        )
    );
}

#[test]
fn a_key_given_twice_is_refused_where_it_stands() {
    let dup = |field: &str| (400, field.to_owned(), "duplicate key".to_owned());
    for (body, field) in [
        // Issue 45: the second url was kept, a ban on the first one evaded.
        (
            page(&[
                r#"{"id":"a","url":"http://banned.example/","score":1,"url":"http://ok.example/"}"#,
            ]),
            "documents[0].url",
        ),
        // A guessed key (the first document taught the order) and an escaped one.
        (
            page(&[
                FULL,
                FULL,
                r#"{"id":"c","url":"u","score":1,"s\u0063ore":2}"#,
            ]),
            "documents[2].score",
        ),
        (
            page(&[r#"{"id":"a","url":"u","score":1,"id":"b"}"#]),
            "documents[0].id",
        ),
        (
            r#"{"documents":[],"query":{"region":"RU","region":"DE"}}"#.to_owned(),
            "query.region",
        ),
        (
            r#"{"documents":[],"depth":3,"documents":[]}"#.to_owned(),
            "documents",
        ),
        (
            r#"{"documents":[],"unit":{"user_id":"a","user_id":"b"}}"#.to_owned(),
            "unit.user_id",
        ),
        (
            page(&[r#"{"id":"a","url":"u","score":1,"factors":{"link":1,"link":0}}"#]),
            "documents[0].factors.link",
        ),
        (
            page(&[r#"{"id":"a","url":"u","score":1,"minhash":{"values":[1],"seed":1,"seed":2}}"#]),
            "documents[0].minhash.seed",
        ),
        (
            page(&[r#"{"id":"a","url":"u","score":1,"attributes":{"x":[{"k":1,"k":2}]}}"#]),
            "documents[0].attributes.x[0].k",
        ),
    ] {
        assert_eq!(refused(body.as_bytes()), dup(field), "{body}");
    }
    // Before its colon and value: what follows the repeated key is not read.
    assert_eq!(
        refused(br#"{"documents":[],"unit":{"a":"1","a""#),
        dup("unit.a")
    );
    // An earlier problem is still the one named.
    assert_eq!(
        refused(br#"{"documents":[{"id":1,"id":"a"}]}"#).1,
        "documents[0].id"
    );
}

#[test]
fn a_map_of_many_keys_finds_a_repeat_through_its_hash_set() {
    for n in [15, 16, 17, 40] {
        let keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\":\"v\"")).collect();
        let body = format!("{{\"documents\":[],\"unit\":{{{}}}}}", keys.join(","));
        assert_eq!(ok(&body).unit.len(), n);
        let again = format!(
            "{{\"documents\":[],\"unit\":{{{},\"k0\":\"w\"}}}}",
            keys.join(",")
        );
        assert_eq!(refused(again.as_bytes()).1, "unit.k0", "{n} keys");
        let attrs = format!(
            "{{\"documents\":[{{\"id\":\"a\",\"url\":\"u\",\"score\":1,\"attributes\":{{{},\"k{}\":0}}}}]}}",
            keys.join(","),
            n - 1
        );
        assert_eq!(
            refused(attrs.as_bytes()).1,
            format!("documents[0].attributes.k{}", n - 1)
        );
    }
}

#[test]
fn a_region_is_two_ascii_letters_in_any_case_and_nothing_else() {
    for region in ["RU", "ru", "rU"] {
        let body = format!(r#"{{"documents":[],"query":{{"region":"{region}"}}}}"#);
        assert!(decode(body.as_bytes(), &LIMITS).is_ok(), "{region}");
    }
    // Issue 45: each was served with the region's bans skipped.
    for (region, repr) in [
        (" RU", "' RU'"),
        ("RU ", "'RU '"),
        ("RUS", "'RUS'"),
        ("ＲＵ", "'ＲＵ'"),
        ("ru-RU", "'ru-RU'"),
        ("ß", "'ß'"),
        ("R\\n", "'R\\n'"),
    ] {
        let body = format!(r#"{{"documents":[],"query":{{"region":"{region}"}}}}"#);
        assert_eq!(
            refused(body.as_bytes()),
            (
                422,
                "query.region".to_owned(),
                format!(
                    "{repr} is not an ISO 3166-1 alpha-2 code (two letters, such as RU, in any case)"
                )
            ),
            "{region}"
        );
    }
}

#[test]
fn bounds_and_types_are_worded_plainly_from_the_wire_s_constants() {
    let long = "x".repeat(crate::wire::MAX_ID_CHARS + 1);
    let cases: Vec<(String, (&str, String))> = vec![
        (
            page(&[&format!(r#"{{"id":"{long}","url":"u","score":1}}"#)]),
            ("documents[0].id", "must be at most 512 characters".into()),
        ),
        (
            page(&[r#"{"id":"a","url":"u","score":1e16}"#]),
            (
                "documents[0].score",
                "must be between -1000000000000000 and 1000000000000000".into(),
            ),
        ),
        (
            page(&[r#"{"id":"a","url":"u","score":1,"spam_score":1.5}"#]),
            ("documents[0].spam_score", "must be between 0 and 1".into()),
        ),
        (
            r#"{"documents":[],"depth":0}"#.into(),
            ("depth", "must be between 1 and 10000".into()),
        ),
        (
            r#"{"documents":[],"depth":2.5}"#.into(),
            (
                "depth",
                "expected an integer or null, got a number with a fraction or exponent".into(),
            ),
        ),
        (
            r#"{"documents":[],"query":{"age_mode":"lax"}}"#.into(),
            (
                "query.age_mode",
                "must be one of strict, moderate, off".into(),
            ),
        ),
        (
            page(&[
                r#"{"id":"a","url":"u","score":1,"minhash":{"values":[18446744073709551616],"shingles":1,"width":1,"seed":1}}"#,
            ]),
            (
                "documents[0].minhash.values[0]",
                "must be between 0 and 18446744073709551615".into(),
            ),
        ),
        (
            page(&[
                r#"{"id":"a","url":"u","score":1,"minhash":{"values":[],"shingles":1,"width":1,"seed":1}}"#,
            ]),
            (
                "documents[0].minhash.values",
                "must hold 1 to 4096 values".into(),
            ),
        ),
        (
            page(&[r#"{"id":"a","url":"u","score":1},{"id":"a","url":"v","score":1}"#]),
            (
                "documents[1].id",
                "duplicate id 'a' (first at documents[0])".into(),
            ),
        ),
    ];
    for (body, (field, problem)) in cases {
        let (status, f, p) = refused(body.as_bytes());
        assert_eq!((status, f.as_str(), p), (422, field, problem), "{body}");
    }
}
