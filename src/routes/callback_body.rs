//! The body of `POST /api/callback`, read straight into results.
//!
//! Executors of every XXL-JOB version post a JSON array of results (XXL-JOB 3.5: an object with
//! `callbackList`; a single object is taken as one result). The reading is lenient where real
//! clients need it: unknown keys are skipped, 2.2's `executeResult{code,msg}` stands in for
//! `handleCode` / `handleMsg`, a `handleMsg` that is not a string is kept as its JSON text (as
//! sent), 3.5's `logDateTime` stands in for `logDateTim`, and a repeated key counts once (the
//! last). A `handleCode` that is not a 32-bit integer refuses that result (its log id is
//! reported), and one that is absent or null reads as 0.
//!
//! Read without building a JSON tree, and each result kept as it is read in its compact form
//! (about 50 bytes and its message): a result without a log id (anything that is not an object,
//! or an object without a positive `logId`) is only counted, so a body costs a small multiple
//! of its size in memory whatever it holds (an 8 MiB array of zeros once grew to 850 MiB of
//! empty results before the first check). A tree would also cost a map and a key string per
//! field of every result (3 % of `xjob serve`'s CPU at 5,000 remote runs a second).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::model::wire::HandleCallbackParam;

/// A callback body read leniently: the results, the log ids of results refused as invalid (a
/// `handleCode` outside 32-bit integers is refused, never cut to one), and how many entries
/// named no run.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Callbacks {
    /// Results to authorise and write.
    pub items: Vec<HandleCallbackParam>,
    /// Log ids of invalid results (skipped).
    pub invalid: Vec<i64>,
    /// Entries without a positive log id (skipped: no run has one).
    pub unknown: usize,
}

/// The fewest bytes a kept result takes in a body: `{"logId":1}` and a comma.
const SMALLEST_RESULT: usize = 12;

impl Callbacks {
    /// Room for the results of a body of `len` bytes: for a large body, for every result it
    /// can hold, taken at once, so the list is never copied as it grows (a growing list held
    /// its old and new copies at once, 5× the body); for a small one (every executor's usual
    /// batch), for what real results take (about 64 bytes each).
    fn for_body(len: usize) -> Self {
        let most = len / SMALLEST_RESULT + 1;
        let room = if len > 64 << 10 {
            most
        } else {
            (len / 64 + 1).min(most)
        };
        Callbacks {
            items: Vec::with_capacity(room),
            ..Callbacks::default()
        }
    }

    /// Keeps one entry as what it is: a result, an invalid result, or one naming no run.
    fn take(&mut self, e: Entry) {
        let log_id = e.log_id.int();
        if log_id <= 0 {
            self.unknown += 1;
            return;
        }
        let code = match e.handle_code {
            Num::Absent => e.legacy_code,
            given => given,
        };
        let code = match code {
            Num::Absent | Num::Null => Some(0),
            Num::Int(c) => i32::try_from(c).ok(),
            Num::Other => None,
        };
        let Some(handle_code) = code else {
            self.invalid.push(log_id);
            return;
        };
        self.items.push(HandleCallbackParam {
            log_id,
            log_date_tim: match e.log_date_tim.int() {
                0 => e.log_date_time.int(),
                t => t,
            },
            handle_code,
            handle_msg: e
                .handle_msg
                .unwrap_or(None)
                .or(e.legacy_msg.unwrap_or(None)),
        });
    }
}

/// Reads a callback body: an array of results (or XXL-JOB 3.5's `{"callbackList": [...]}`, or
/// one object).
pub(crate) fn parse_callbacks(body: &[u8]) -> Result<Callbacks, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let out = match BodySeed(body.len())
        .deserialize(&mut de)
        .and_then(|b| de.end().map(|()| b))
    {
        Ok(Some(c)) => c,
        Ok(None) => return Err("invalid callback body: expected a JSON array".into()),
        Err(e) => return Err(format!("invalid callback body: {e}")),
    };
    Ok(out)
}

/// A message field: absent (`None`), or given — null as `Some(None)`, a string as its text,
/// any other value as its JSON text as sent.
type Msg = Option<Option<String>>;

/// Reads a message value without building a tree.
fn msg<'de, A: MapAccess<'de>>(a: &mut A) -> Result<Option<String>, A::Error> {
    let raw: Box<RawValue> = a.next_value()?;
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'n') if text == "null" => Ok(None),
        Some(b'"') => serde_json::from_str::<String>(text)
            .map(Some)
            .map_err(de::Error::custom),
        _ => Ok(Some(text.to_string())),
    }
}

/// A numeric field as far as a callback needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Num {
    /// Not in the object.
    #[default]
    Absent,
    Null,
    /// An integer that fits `i64`.
    Int(i64),
    /// Anything else (a fraction, a string, a bool, an array, an object, a huge integer).
    Other,
}

impl Num {
    /// The integer, 0 for anything else.
    fn int(self) -> i64 {
        match self {
            Num::Int(v) => v,
            _ => 0,
        }
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(i64::try_from(v).map_or(Num::Other, Num::Int))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Num, E> {
                Ok(Num::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Num, E> {
                Ok(Num::Other)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Num, E> {
                Ok(Num::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Num, E> {
                Ok(Num::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Num, E> {
                Ok(Num::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Num, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Num, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Num::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Num, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Num::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// The keys a result (or the body's object, or 2.2's `executeResult`) is read for.
#[derive(Deserialize)]
#[serde(field_identifier)]
enum Key {
    #[serde(rename = "logId")]
    LogId,
    #[serde(rename = "logDateTim")]
    LogDateTim,
    #[serde(rename = "logDateTime")]
    LogDateTime,
    #[serde(rename = "handleCode")]
    HandleCode,
    #[serde(rename = "handleMsg")]
    HandleMsg,
    #[serde(rename = "executeResult")]
    ExecuteResult,
    #[serde(rename = "code")]
    Code,
    #[serde(rename = "msg")]
    Msg,
    #[serde(rename = "callbackList")]
    CallbackList,
    #[serde(other)]
    Other,
}

/// One result as posted, while it is read. Anything that is not an object reads as a result
/// with every field absent (as a JSON tree's look-ups would find it).
#[derive(Default)]
struct Entry {
    log_id: Num,
    log_date_tim: Num,
    log_date_time: Num,
    handle_code: Num,
    handle_msg: Msg,
    legacy_code: Num,
    legacy_msg: Msg,
}

/// 2.2's `executeResult`: its `code` and `msg` when it is an object.
#[derive(Default)]
struct Legacy {
    code: Num,
    msg: Msg,
}

/// Consumes any value whose content does not matter.
fn skip_seq<'de, A: SeqAccess<'de>>(mut a: A) -> Result<(), A::Error> {
    while a.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements the scalar visitor methods of a type read from an object (or an array): a
/// scalar reads as the type's default.
macro_rules! object_or_default {
    ($ty:ty) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<$ty, E> {
            Ok(<$ty>::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<$ty, E> {
            Ok(<$ty>::default())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<$ty, E> {
            Ok(<$ty>::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<$ty, E> {
            Ok(<$ty>::default())
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<$ty, E> {
            Ok(<$ty>::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<$ty, E> {
            Ok(<$ty>::default())
        }
        fn visit_none<E: de::Error>(self) -> Result<$ty, E> {
            Ok(<$ty>::default())
        }
    };
}

impl<'de> Deserialize<'de> for Legacy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Legacy;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            object_or_default!(Legacy);
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Legacy, A::Error> {
                skip_seq(a)?;
                Ok(Legacy::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Legacy, A::Error> {
                let mut l = Legacy::default();
                while let Some(k) = a.next_key::<Key>()? {
                    match k {
                        Key::Code => l.code = a.next_value()?,
                        Key::Msg => l.msg = Some(msg(&mut a)?),
                        _ => {
                            a.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(l)
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a JSON value's results into `self.0` when it is an array (answers whether it was).
struct ListInto<'a>(&'a mut Callbacks);

impl<'de> DeserializeSeed<'de> for ListInto<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ListInto<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    object_or_default!(bool);
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<bool, A::Error> {
        while let Some(e) = a.next_element::<Entry>()? {
            self.0.take(e);
        }
        Ok(true)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<bool, A::Error> {
        while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// Reads one entry's fields from an object; a `callbackList` array's results go to `list`
/// when given (the body's object), else it is skipped (an entry inside a list).
fn entry_fields<'de, A: MapAccess<'de>>(
    mut a: A,
    mut list: Option<(&mut Option<Callbacks>, usize)>,
) -> Result<Entry, A::Error> {
    let mut i = Entry::default();
    while let Some(k) = a.next_key::<Key>()? {
        match k {
            Key::LogId => i.log_id = a.next_value()?,
            Key::LogDateTim => i.log_date_tim = a.next_value()?,
            Key::LogDateTime => i.log_date_time = a.next_value()?,
            Key::HandleCode => i.handle_code = a.next_value()?,
            Key::HandleMsg => i.handle_msg = Some(msg(&mut a)?),
            Key::ExecuteResult => {
                let l: Legacy = a.next_value()?;
                (i.legacy_code, i.legacy_msg) = (l.code, l.msg);
            }
            Key::CallbackList => match list.as_mut() {
                Some((slot, len)) => {
                    let mut found = Callbacks::for_body(*len);
                    let is_list = a.next_value_seed(ListInto(&mut found))?;
                    **slot = is_list.then_some(found);
                }
                None => {
                    a.next_value::<IgnoredAny>()?;
                }
            },
            Key::Code | Key::Msg | Key::Other => {
                a.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(i)
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entry;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            object_or_default!(Entry);
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Entry, A::Error> {
                skip_seq(a)?;
                Ok(Entry::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Entry, A::Error> {
                entry_fields(a, None)
            }
        }
        d.deserialize_any(V)
    }
}

/// The whole body (of the given length): its results, or `None` when it is neither an array
/// nor an object.
struct BodySeed(usize);

impl<'de> DeserializeSeed<'de> for BodySeed {
    type Value = Option<Callbacks>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BodySeed {
    type Value = Option<Callbacks>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array or object")
    }
    object_or_default!(Option<Callbacks>);
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
        let mut out = Callbacks::for_body(self.0);
        ListInto(&mut out).visit_seq(a)?;
        Ok(Some(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
        // 3.5's shape: the object is a wrapper around its list of results; else it is one
        let mut list = None;
        let one = entry_fields(a, Some((&mut list, self.0)))?;
        Ok(Some(match list {
            Some(l) => l,
            None => {
                let mut out = Callbacks::default();
                out.take(one);
                out
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// What the reading must answer: the reading through a JSON tree it replaced.
    fn through_tree(body: &[u8]) -> Result<Callbacks, String> {
        let v: Value =
            serde_json::from_slice(body).map_err(|e| format!("invalid callback body: {e}"))?;
        let items = match v {
            Value::Array(a) => a,
            Value::Object(mut o) if o.get("callbackList").is_some_and(Value::is_array) => {
                match o.remove("callbackList") {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                }
            }
            Value::Object(_) => vec![v],
            _ => return Err("invalid callback body: expected a JSON array".into()),
        };
        let num = |o: &Value, k: &str| o.get(k).and_then(Value::as_i64).unwrap_or_default();
        let text = |v: Option<&Value>| match v {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
        };
        let mut out = Callbacks::default();
        for o in &items {
            let legacy = o.get("executeResult");
            let code = o
                .get("handleCode")
                .or_else(|| legacy.and_then(|r| r.get("code")));
            let code = match code {
                None | Some(Value::Null) => Some(0),
                Some(c) => c.as_i64().and_then(|c| i32::try_from(c).ok()),
            };
            let log_id = num(o, "logId");
            if log_id <= 0 {
                out.unknown += 1;
                continue;
            }
            let Some(code) = code else {
                out.invalid.push(log_id);
                continue;
            };
            out.items.push(HandleCallbackParam {
                log_id,
                log_date_tim: match num(o, "logDateTim") {
                    0 => num(o, "logDateTime"),
                    t => t,
                },
                handle_code: code,
                handle_msg: text(o.get("handleMsg"))
                    .or_else(|| text(legacy.and_then(|r| r.get("msg")))),
            });
        }
        Ok(out)
    }

    /// `/api/callback` bodies parse from every shape XXL-JOB versions send.
    #[test]
    fn callbacks_parse_leniently() {
        let parsed = parse_callbacks(
            br#"[{"logId":1,"logDateTim":5,"handleCode":200,"handleMsg":null},
                 {"logId":2,"handleCode":500,"handleMsg":{"a":1},"extra":true},
                 {"logId":3,"handleCode":500,"handleMsg":42},
                 {"logId":4,"executeResult":{"code":500,"msg":"old"}},
                 {"logId":5,"handleCode":4294967496},
                 {"logId":6,"handleCode":-2147483649},
                 {"logId":7,"handleCode":"200"},
                 {"logId":8,"handleCode":-2147483648}]"#,
        )
        .unwrap();
        let items = &parsed.items;
        assert_eq!(items[0].handle_msg, None);
        assert_eq!(items[0].log_date_tim, 5);
        assert_eq!(items[1].handle_msg.as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(items[2].handle_msg.as_deref(), Some("42"));
        assert_eq!(
            (items[3].handle_code, items[3].handle_msg.as_deref()),
            (500, Some("old"))
        );
        // a code outside i32 (4294967496 used to become 200) or not a number is refused, not cut
        assert_eq!(parsed.invalid, vec![5, 6, 7]);
        assert_eq!((items[4].log_id, items[4].handle_code), (8, i32::MIN));
        assert!(parse_callbacks(b"nope").is_err());
        assert!(parse_callbacks(b"42").is_err());
        assert!(parse_callbacks(b"[{\"logId\":1}").is_err());
    }

    /// XXL-JOB 3.5's wrapper, a single object, 3.5's `logDateTime`, repeated keys (the last
    /// counts), and values that are not objects where results are expected.
    #[test]
    fn shapes_and_repeats() {
        let p = parse_callbacks(
            br#"{"callbackList":[{"logId":9,"logDateTime":7,"handleCode":200,"handleMsg":"ok"}]}"#,
        )
        .unwrap();
        assert_eq!((p.items[0].log_id, p.items[0].log_date_tim), (9, 7));
        assert_eq!(p.items[0].handle_msg.as_deref(), Some("ok"));
        let p = parse_callbacks(br#"{"logId":3,"handleCode":500,"callbackList":null}"#).unwrap();
        assert_eq!((p.items[0].log_id, p.items[0].handle_code), (3, 500));
        let p = parse_callbacks(br#"[{"logId":1,"logId":2,"handleCode":"x","handleCode":200}]"#)
            .unwrap();
        assert_eq!((p.items[0].log_id, p.items[0].handle_code), (2, 200));
        // entries naming no run are counted, not kept
        let p = parse_callbacks(br#"[1, "a", [2], null, {"logId":0}, {"logId":-3}, {}]"#).unwrap();
        assert_eq!((p.items.len(), p.unknown), (0, 7));
        // a message that is not a string is kept as its JSON text, as sent
        let p = parse_callbacks(br#"[{"logId":1,"handleMsg":[1, {"a" : 2}]}]"#).unwrap();
        assert_eq!(p.items[0].handle_msg.as_deref(), Some(r#"[1, {"a" : 2}]"#));
    }

    /// A JSON value built from the keys a callback is read for.
    fn json() -> impl Strategy<Value = Value> {
        let key = prop::sample::select(vec![
            "logId",
            "logDateTim",
            "logDateTime",
            "handleCode",
            "handleMsg",
            "executeResult",
            "code",
            "msg",
            "callbackList",
            "other",
        ]);
        let leaf = scalar();
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..7).prop_map(|kv| {
                    Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }),
            ]
        })
    }

    /// A JSON scalar of any kind a client might put in a field.
    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-3000i64..3000).prop_map(Value::from),
            // (fractions a decimal writes exactly: a message that is not a string is kept as
            // sent, which a tree's reading matches only for numbers it reads back exactly)
            (-1_000_000i64..1_000_000).prop_map(|i| Value::from(i as f64 / 8.0)),
            "[a-z\"\\\\é]{0,6}".prop_map(Value::from),
        ]
    }

    /// A body shaped like what executors send: results whose fields are each present or not,
    /// of any type, in an array, in 3.5's wrapper, or alone.
    fn result_body() -> impl Strategy<Value = Value> {
        let field = || prop::option::of(scalar());
        let legacy = prop_oneof![
            scalar(),
            (field(), field(), field()).prop_map(|(c, m, o)| {
                let mut r = serde_json::Map::new();
                for (k, v) in [("code", c), ("msg", m), ("other", o)] {
                    if let Some(v) = v {
                        r.insert(k.into(), v);
                    }
                }
                Value::Object(r)
            }),
        ];
        let result = (
            (field(), field(), field()),
            (field(), field(), prop::option::of(legacy), field()),
        )
            .prop_map(|((id, tim, time), (code, msg, legacy, other))| {
                let mut r = serde_json::Map::new();
                let fields = [
                    ("logId", id),
                    ("logDateTim", tim),
                    ("logDateTime", time),
                    ("handleCode", code),
                    ("handleMsg", msg),
                    ("executeResult", legacy),
                    ("callbackList", other),
                ];
                for (k, v) in fields {
                    if let Some(v) = v {
                        r.insert(k.into(), v);
                    }
                }
                Value::Object(r)
            })
            .boxed();
        let list = prop::collection::vec(result.clone(), 0..5).prop_map(Value::Array);
        prop_oneof![
            list.clone(),
            list.prop_map(|l| serde_json::json!({ "callbackList": l })),
            result,
        ]
    }

    proptest! {
        /// Whatever the body, the reading answers what the tree's reading answered (a body
        /// that is not JSON is refused by both).
        #[test]
        fn reads_as_the_tree_did(v in prop_oneof![json(), result_body()], cut in 0usize..4) {
            let text = serde_json::to_vec(&v).unwrap();
            let body = &text[..text.len() - cut.min(text.len())];
            let ours = parse_callbacks(body);
            let tree = through_tree(body);
            prop_assert_eq!(ours.is_ok(), tree.is_ok(), "{:?} vs {:?}", ours, tree);
            if let (Ok(a), Ok(b)) = (ours, tree) {
                prop_assert_eq!(a, b);
            }
        }
    }
}
