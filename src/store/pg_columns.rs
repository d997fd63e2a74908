//! Rows sent to PostgreSQL as one array parameter per column and read back with `unnest`: the
//! server takes each column as one binary value, where a JSON row set is text it parses field
//! by field (12 % of its CPU at 1,000 fires a second, about 30 % of a workflow pass's
//! statement; BENCHMARKS.md).
//!
//! `sea-query-sqlx` binds an array as a vector of plain values (`Vec<i64>`, `Vec<String>`, …)
//! and panics on a NULL element. So a NULL of a column that may be NULL travels as its type's
//! zero, with the column's bit set in one more array: the rows' NULL mask ([`NULLS`]). The
//! select list [`unnest`] writes turns a set bit back into NULL.

use sea_orm::sea_query::ArrayType;
use sea_orm::{DbErr, Value};

use crate::error::Result;

/// The element type of a column's array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    BigInt,
    Int,
    SmallInt,
    Text,
    Time,
}

impl Elem {
    fn sql(self) -> &'static str {
        match self {
            Elem::BigInt => "bigint[]",
            Elem::Int => "int[]",
            Elem::SmallInt => "smallint[]",
            Elem::Text => "text[]",
            Elem::Time => "timestamp[]",
        }
    }

    /// The element's SQL type.
    fn scalar(self) -> &'static str {
        self.sql().trim_end_matches("[]")
    }

    fn array_type(self) -> ArrayType {
        match self {
            Elem::BigInt => ArrayType::BigInt,
            Elem::Int => ArrayType::Int,
            Elem::SmallInt => ArrayType::SmallInt,
            Elem::Text => ArrayType::String,
            Elem::Time => ArrayType::ChronoDateTime,
        }
    }

    /// What a NULL travels as.
    fn zero(self) -> Value {
        match self {
            Elem::BigInt => Value::BigInt(Some(0)),
            Elem::Int => Value::Int(Some(0)),
            Elem::SmallInt => Value::SmallInt(Some(0)),
            Elem::Text => Value::String(Some(String::new())),
            Elem::Time => Value::ChronoDateTime(Some(chrono::NaiveDateTime::default())),
        }
    }

    /// `v` as an element of this type (`None`: NULL); a narrower integer is widened. Another
    /// type is refused: its array would panic when bound.
    fn element(self, v: Value) -> std::result::Result<Option<Value>, Value> {
        Ok(match (self, v) {
            (Elem::BigInt, Value::BigInt(x)) => x.map(Value::from),
            (Elem::BigInt, Value::Int(x)) => x.map(|x| Value::from(i64::from(x))),
            (Elem::BigInt, Value::SmallInt(x)) => x.map(|x| Value::from(i64::from(x))),
            (Elem::Int, Value::Int(x)) => x.map(Value::from),
            (Elem::Int, Value::SmallInt(x)) => x.map(|x| Value::from(i32::from(x))),
            (Elem::SmallInt, Value::SmallInt(x)) => x.map(Value::from),
            (Elem::Text, Value::String(x)) => x.map(Value::from),
            (Elem::Time, Value::ChronoDateTime(x)) => x.map(Value::from),
            (_, other) => return Err(other),
        })
    }
}

/// A column bound as one array: its name in the statement, its elements' type, whether it may
/// be NULL (then it has a bit in the rows' NULL mask).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Col {
    pub(crate) name: &'static str,
    pub(crate) elem: Elem,
    pub(crate) nullable: bool,
}

/// A column that is never NULL.
pub(crate) const fn col(name: &'static str, elem: Elem) -> Col {
    Col {
        name,
        elem,
        nullable: false,
    }
}

/// A column that may be NULL.
pub(crate) const fn nullable(name: &'static str, elem: Elem) -> Col {
    Col {
        name,
        elem,
        nullable: true,
    }
}

/// The name of the rows' NULL mask: bit `i` set says the row's `i`-th nullable column is NULL.
pub(crate) const NULLS: &str = "nn";

/// The bit of `cols[at]` in a row's NULL mask (at most 31 nullable columns).
fn bit(cols: &[Col], at: usize) -> i32 {
    1 << cols[..at].iter().filter(|c| c.nullable).count()
}

/// Rows of `cols`, gathered column by column: [`Columns::row`] starts one, then
/// [`Columns::push`] gives its values in the columns' order.
pub(crate) struct Columns<'c> {
    cols: &'c [Col],
    values: Vec<Vec<Value>>,
    /// Per row, its NULL mask.
    nulls: Vec<Value>,
    /// The column the next pushed value is of.
    next: usize,
}

impl<'c> Columns<'c> {
    pub(crate) fn new(cols: &'c [Col]) -> Self {
        debug_assert!(cols.iter().filter(|c| c.nullable).count() <= 31);
        Columns {
            cols,
            values: vec![Vec::new(); cols.len()],
            nulls: Vec::new(),
            next: 0,
        }
    }

    /// Starts a row.
    pub(crate) fn row(&mut self) {
        debug_assert!(self.nulls.is_empty() || self.next == self.cols.len());
        self.nulls.push(Value::Int(Some(0)));
        self.next = 0;
    }

    /// The current row's next column. Refuses a value of another type and a NULL of a column
    /// that may not be one.
    pub(crate) fn push(&mut self, v: impl Into<Value>) -> Result<()> {
        let at = self.next;
        let Some(c) = self.cols.get(at) else {
            return Err(DbErr::Type(format!("a row of {} columns given more", at)).into());
        };
        let v = match c.elem.element(v.into()) {
            Ok(Some(v)) => v,
            Ok(None) if c.nullable => {
                if let Some(Value::Int(Some(mask))) = self.nulls.last_mut() {
                    *mask |= bit(self.cols, at);
                }
                c.elem.zero()
            }
            Ok(None) => {
                return Err(DbErr::Type(format!("column {} is not nullable", c.name)).into());
            }
            Err(other) => {
                return Err(DbErr::Type(format!("column {} given {other:?}", c.name)).into());
            }
        };
        self.values[at].push(v);
        self.next += 1;
        Ok(())
    }

    /// How many rows were started.
    pub(crate) fn len(&self) -> usize {
        self.nulls.len()
    }

    /// The parameters: one array per column, then the NULL mask when a column may be NULL.
    pub(crate) fn args(self) -> Vec<Value> {
        let masked = self.cols.iter().any(|c| c.nullable);
        let mut out: Vec<Value> = self
            .cols
            .iter()
            .zip(self.values)
            .map(|(c, v)| Value::Array(c.elem.array_type(), Some(Box::new(v))))
            .collect();
        if masked {
            out.push(Value::Array(ArrayType::Int, Some(Box::new(self.nulls))));
        }
        out
    }
}

/// How many parameters [`Columns::args`] of `cols` gives.
pub(crate) fn params(cols: &[Col]) -> usize {
    cols.len() + usize::from(cols.iter().any(|c| c.nullable))
}

/// `SELECT <columns> FROM unnest(<p>::t[], …) AS <alias>(<names>[, nn])` over the arrays of
/// [`Columns::args`], each parameter written by `param` (given its index from 0): its rows with
/// NULL where the mask says so.
pub(crate) fn select(cols: &[Col], alias: &str, param: impl Fn(usize) -> String) -> String {
    let mut arrays: Vec<String> = (0..cols.len())
        .map(|i| format!("{}::{}", param(i), cols[i].elem.sql()))
        .collect();
    let mut names: Vec<&str> = cols.iter().map(|c| c.name).collect();
    if cols.iter().any(|c| c.nullable) {
        arrays.push(format!("{}::int[]", param(cols.len())));
        names.push(NULLS);
    }
    let picked: Vec<String> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| match c.nullable {
            true => format!(
                "CASE WHEN {NULLS} & {} = 0 THEN {} END AS {}",
                bit(cols, i),
                c.name,
                c.name
            ),
            false => c.name.to_string(),
        })
        .collect();
    format!(
        "SELECT {} FROM unnest({}) AS {alias}({})",
        picked.join(", "),
        arrays.join(", "),
        names.join(", ")
    )
}

/// `SELECT * FROM json_to_recordset(<p>::json) AS <alias>(<name> <type>, …)`: rows of `cols`
/// given as one JSON array of objects keyed by the columns' names. Cheaper than [`select`] for
/// a handful of rows: each array is a parameter the server decodes and a function scan it
/// materialises (a workflow start of 7 rows: 0.144 ms as arrays against 0.132 as JSON).
pub(crate) fn json_select(cols: &[Col], alias: &str, param: &str) -> String {
    let typed: Vec<String> = cols
        .iter()
        .map(|c| format!("{} {}", c.name, c.elem.scalar()))
        .collect();
    format!(
        "SELECT * FROM json_to_recordset({param}::json) AS {alias}({})",
        typed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: [Col; 4] = [
        col("id", Elem::BigInt),
        nullable("a", Elem::Text),
        col("b", Elem::SmallInt),
        nullable("c", Elem::BigInt),
    ];

    /// A NULL travels as its type's zero with its column's bit set; a narrower integer is
    /// widened; the statement's parameters follow the columns, the mask last.
    #[test]
    fn nulls_travel_as_zero_with_their_bit() {
        let mut c = Columns::new(&COLS);
        c.row();
        c.push(7_i32).unwrap();
        c.push(Option::<String>::None).unwrap();
        c.push(3_i16).unwrap();
        c.push(Option::<i64>::None).unwrap();
        c.row();
        c.push(8_i64).unwrap();
        c.push("x").unwrap();
        c.push(4_i16).unwrap();
        c.push(Some(9_i64)).unwrap();
        assert_eq!(c.len(), 2);
        let args = c.args();
        assert_eq!(args.len(), params(&COLS));
        let arr = |v: &Value| match v {
            Value::Array(_, Some(a)) => a.to_vec(),
            _ => panic!("{v:?}"),
        };
        assert_eq!(arr(&args[0]), vec![Value::from(7_i64), Value::from(8_i64)]);
        assert_eq!(arr(&args[1]), vec![Value::from(""), Value::from("x")]);
        assert_eq!(arr(&args[3]), vec![Value::from(0_i64), Value::from(9_i64)]);
        assert_eq!(arr(&args[4]), vec![Value::from(1 | 2), Value::from(0)]);
        let sql = select(&COLS, "v", |i| format!("${}", i + 1));
        assert!(
            sql.contains("CASE WHEN nn & 1 = 0 THEN a END AS a"),
            "{sql}"
        );
        assert!(
            sql.contains("CASE WHEN nn & 2 = 0 THEN c END AS c"),
            "{sql}"
        );
        assert!(sql.contains("$5::int[]) AS v(id, a, b, c, nn)"), "{sql}");
    }

    /// A value of another type, a NULL where none may be and a column too many are errors,
    /// not arrays that would panic when bound.
    #[test]
    fn a_wrong_value_is_refused() {
        let mut c = Columns::new(&COLS);
        c.row();
        assert!(c.push("seven").is_err());
        assert!(c.push(Option::<i64>::None).is_err());
        c.push(1_i64).unwrap();
        c.push("a").unwrap();
        assert!(c.push(5_i64).is_err(), "bigint into smallint");
        c.push(5_i16).unwrap();
        c.push(1_i64).unwrap();
        assert!(c.push(1_i64).is_err());
    }
}
