//! The decision nodes' expression language: small, safe, and total — no script engine, no
//! shell, no loops, no calls; it only reads the run's JSON context.
//!
//! ```text
//! expr    := or
//! or      := and ( "||" and )*
//! and     := not ( "&&" not )*
//! not     := "!" not | cmp
//! cmp     := value ( ("==" | "!=" | "<" | "<=" | ">" | ">=") value )?
//! value   := number | string | "true" | "false" | "null" | path | "(" expr ")"
//! path    := name ( "." name | "[" digits "]" )*      (a key of the context; absent = null)
//! string  := '"' ... '"' | "'" ... "'"                 (with \" \' \\ \n \t escapes)
//! ```
//!
//! Truth: `false`, `null`, `0`, `""`, `[]` and `{}` are false, anything else true. `==` compares
//! JSON values (numbers by value); `<` and the like compare two numbers or two strings and are
//! false otherwise. An expression is at most [`MAX_LEN`] characters and [`MAX_DEPTH`] deep;
//! parsing and evaluating never panic.

use serde_json::Value;

/// Longest expression, in characters.
pub const MAX_LEN: usize = 1_000;
/// Deepest nesting of `!`, `(` and operators.
pub const MAX_DEPTH: usize = 32;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A literal.
    Lit(Value),
    /// A context path.
    Path(Vec<Step>),
    /// `!e`.
    Not(Box<Expr>),
    /// `a && b`.
    And(Box<Expr>, Box<Expr>),
    /// `a || b`.
    Or(Box<Expr>, Box<Expr>),
    /// `a op b`.
    Cmp(Box<Expr>, Op, Box<Expr>),
}

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// Parses `src`; the error says where and what.
pub fn parse(src: &str) -> Result<Expr, String> {
    if src.chars().count() > MAX_LEN {
        return Err(format!("longer than {MAX_LEN} characters"));
    }
    let mut p = Parser {
        s: src.as_bytes(),
        i: 0,
        depth: 0,
    };
    let e = p.or()?;
    p.ws();
    if p.i < p.s.len() {
        return Err(format!("unexpected `{}` at {}", p.rest(), p.i));
    }
    Ok(e)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn rest(&self) -> String {
        String::from_utf8_lossy(&self.s[self.i..self.s.len().min(self.i + 12)]).into_owned()
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.deeper()?;
        let mut e = self.and()?;
        while self.eat("||") {
            self.deeper()?;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.not()?;
        while self.eat("&&") {
            self.deeper()?;
            e = Expr::And(Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, String> {
        self.ws();
        if self.s.get(self.i) == Some(&b'!') && self.s.get(self.i + 1) != Some(&b'=') {
            self.i += 1;
            self.deeper()?;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Expr, String> {
        let left = self.value()?;
        for (t, op) in [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ] {
            if self.eat(t) {
                let right = self.value()?;
                return Ok(Expr::Cmp(Box::new(left), op, Box::new(right)));
            }
        }
        Ok(left)
    }

    fn value(&mut self) -> Result<Expr, String> {
        self.ws();
        let Some(&c) = self.s.get(self.i) else {
            return Err("unexpected end".into());
        };
        match c {
            b'(' => {
                self.i += 1;
                self.deeper()?;
                let e = self.or()?;
                if !self.eat(")") {
                    return Err(format!("`)` expected at {}", self.i));
                }
                Ok(e)
            }
            b'"' | b'\'' => self.string(c),
            b'-' | b'0'..=b'9' => self.number(),
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'$' => self.path(),
            _ => Err(format!("unexpected `{}` at {}", self.rest(), self.i)),
        }
    }

    fn string(&mut self, quote: u8) -> Result<Expr, String> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        while let Some(&c) = self.s.get(self.i) {
            self.i += 1;
            match c {
                c if c == quote => {
                    let s = String::from_utf8(out).map_err(|_| "invalid UTF-8".to_string())?;
                    return Ok(Expr::Lit(Value::String(s)));
                }
                b'\\' => {
                    let esc = self.s.get(self.i).copied();
                    self.i += 1;
                    out.push(match esc {
                        Some(b'n') => b'\n',
                        Some(b't') => b'\t',
                        Some(e @ (b'"' | b'\'' | b'\\')) => e,
                        _ => return Err(format!("unknown escape at {}", self.i - 1)),
                    });
                }
                c => out.push(c),
            }
        }
        Err(format!("unterminated string from {start}"))
    }

    fn number(&mut self) -> Result<Expr, String> {
        let start = self.i;
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E'))
        {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
        if let Ok(n) = text.parse::<i64>() {
            return Ok(Expr::Lit(Value::from(n)));
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Expr::Lit(Value::from(f))),
            _ => Err(format!("`{text}` at {start} is not a number")),
        }
    }

    fn name(&mut self) -> Option<String> {
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'-'))
        {
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn path(&mut self) -> Result<Expr, String> {
        let first = self.name().unwrap_or_default();
        match first.as_str() {
            "true" => return Ok(Expr::Lit(Value::Bool(true))),
            "false" => return Ok(Expr::Lit(Value::Bool(false))),
            "null" => return Ok(Expr::Lit(Value::Null)),
            _ => {}
        }
        let mut steps = vec![Step::Key(first)];
        loop {
            match self.s.get(self.i) {
                Some(b'.') => {
                    self.i += 1;
                    let n = self
                        .name()
                        .ok_or_else(|| format!("a key expected after `.` at {}", self.i))?;
                    steps.push(Step::Key(n));
                }
                Some(b'[') => {
                    self.i += 1;
                    let start = self.i;
                    while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                        self.i += 1;
                    }
                    let n = std::str::from_utf8(&self.s[start..self.i])
                        .ok()
                        .and_then(|t| t.parse().ok())
                        .ok_or_else(|| format!("an index expected at {start}"))?;
                    if self.s.get(self.i) != Some(&b']') {
                        return Err(format!("`]` expected at {}", self.i));
                    }
                    self.i += 1;
                    steps.push(Step::Index(n));
                }
                _ => return Ok(Expr::Path(steps)),
            }
        }
    }
}

/// Whether a value counts as true.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn lookup<'a>(ctx: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    let mut v = ctx;
    for s in steps {
        v = match s {
            Step::Key(k) => v.get(k)?,
            Step::Index(i) => v.get(*i)?,
        };
    }
    Some(v)
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

/// Evaluates `e` on `ctx`.
pub fn eval(e: &Expr, ctx: &Value) -> Value {
    match e {
        Expr::Lit(v) => v.clone(),
        Expr::Path(steps) => lookup(ctx, steps).cloned().unwrap_or(Value::Null),
        Expr::Not(e) => Value::Bool(!truthy(&eval(e, ctx))),
        Expr::And(a, b) => Value::Bool(truthy(&eval(a, ctx)) && truthy(&eval(b, ctx))),
        Expr::Or(a, b) => Value::Bool(truthy(&eval(a, ctx)) || truthy(&eval(b, ctx))),
        Expr::Cmp(a, op, b) => {
            let (a, b) = (eval(a, ctx), eval(b, ctx));
            let ord = match (&a, &b) {
                (Value::Number(x), Value::Number(y)) => x
                    .as_f64()
                    .zip(y.as_f64())
                    .and_then(|(x, y)| x.partial_cmp(&y)),
                (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
                _ => None,
            };
            Value::Bool(match op {
                Op::Eq => equal(&a, &b),
                Op::Ne => !equal(&a, &b),
                Op::Lt => ord.is_some_and(|o| o.is_lt()),
                Op::Le => ord.is_some_and(|o| o.is_le()),
                Op::Gt => ord.is_some_and(|o| o.is_gt()),
                Op::Ge => ord.is_some_and(|o| o.is_ge()),
            })
        }
    }
}

/// Parses and evaluates `src` on `ctx` as true or false.
pub fn decide(src: &str, ctx: &Value) -> Result<bool, String> {
    Ok(truthy(&eval(&parse(src)?, ctx)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// The documented forms evaluate as documented.
    #[test]
    fn expressions_read_the_context() {
        let ctx = json!({
            "rows": 1200, "status": "ok", "shards": [3, 4], "cfg": { "dry-run": false },
            "name": "it's"
        });
        for (src, want) in [
            ("rows > 1000", true),
            ("rows >= 1200 && status == 'ok'", true),
            ("rows < 10 || status != \"ok\"", false),
            ("!cfg.dry-run", true),
            ("shards[1] == 4", true),
            ("shards[7] == null", true),
            ("missing", false),
            ("!(rows == 1200.0)", false),
            ("name == 'it\\'s'", true),
            ("status > 1", false),
            ("-1 < 0", true),
            ("true && !false", true),
        ] {
            assert_eq!(decide(src, &ctx), Ok(want), "{src}");
        }
        for bad in [
            "", "rows >", "(rows", "'open", "rows ==", "a.", "x[", "1.2.3", "rows @ 1",
        ] {
            assert!(parse(bad).is_err(), "{bad} should not parse");
        }
        let deep = format!("{}true{}", "(".repeat(40), ")".repeat(40));
        assert!(parse(&deep).unwrap_err().contains("deeper"));
        assert!(parse(&"a || ".repeat(300)).is_err());
    }

    proptest! {
        /// No input makes the parser or the evaluator panic.
        #[test]
        fn any_text_parses_or_fails_cleanly(src in "[ -~]{0,80}") {
            if let Ok(e) = parse(&src) {
                let _ = eval(&e, &json!({"a": 1, "b": "x", "c": [true]}));
            }
        }

        /// Comparisons of numbers agree with Rust's.
        #[test]
        fn number_comparisons_agree(a in -1000i64..1000, b in -1000i64..1000) {
            let ctx = json!({ "a": a, "b": b });
            prop_assert_eq!(decide("a < b", &ctx), Ok(a < b));
            prop_assert_eq!(decide("a >= b", &ctx), Ok(a >= b));
            prop_assert_eq!(decide("a == b || a != b", &ctx), Ok(true));
        }
    }
}
