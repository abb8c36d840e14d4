//! The field tables of the records: each record's layout is written once,
//! in [`crate::record`], through the [`record_table!`](crate::record_table) macro, which makes
//! the struct (with its serde attributes) and its table of [`Column`]s:
//! name, kind, unit, doc and a typed getter and setter per field.
//!
//! Code that stores or exports a record (the SQLite columns, the Parquet
//! schema) walks the table, so a field is never bound or read by a
//! hand-kept position, and a test checks the man pages against it.

/// The type of a field's values, as a store sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    Text,
    /// A whole number.
    Int,
    /// A floating-point number.
    Real,
    /// A boolean.
    Bool,
    /// A time: RFC 3339 text on the wire (or null), epoch seconds in a store.
    Time,
}

/// What the table says of one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The field's name on the wire (its units are in it).
    pub name: &'static str,
    /// The type of its values.
    pub kind: Kind,
    /// The unit of its values (`""` when it has none).
    pub unit: &'static str,
    /// One line on what it holds.
    pub doc: &'static str,
}

/// One field's value, borrowed from a record. Absent values are `None`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// A string (or, for [`Kind::Time`], its RFC 3339 text).
    Text(Option<&'a str>),
    /// A whole number.
    Int(Option<i64>),
    /// A floating-point number.
    Real(Option<f64>),
    /// A boolean, never absent.
    Bool(bool),
}

/// The Rust types a table field may have: how each gives and takes a [`Value`].
pub trait FieldType {
    /// The value held.
    fn value(&self) -> Value<'_>;
    /// Sets the value; an error says why `v` does not fit.
    fn set(&mut self, v: Value<'_>) -> Result<(), String>;
}

fn mismatch(want: &str, got: Value<'_>) -> String {
    format!("expected {want}, got {got:?}")
}

impl FieldType for String {
    fn value(&self) -> Value<'_> {
        Value::Text(Some(self))
    }
    fn set(&mut self, v: Value<'_>) -> Result<(), String> {
        match v {
            Value::Text(Some(s)) => {
                self.clear();
                self.push_str(s);
                Ok(())
            }
            other => Err(mismatch("a string", other)),
        }
    }
}

impl FieldType for Option<String> {
    fn value(&self) -> Value<'_> {
        Value::Text(self.as_deref())
    }
    fn set(&mut self, v: Value<'_>) -> Result<(), String> {
        match v {
            Value::Text(s) => *self = s.map(str::to_owned),
            Value::Int(None) | Value::Real(None) => *self = None,
            other => return Err(mismatch("a string or null", other)),
        }
        Ok(())
    }
}

impl FieldType for Option<u32> {
    fn value(&self) -> Value<'_> {
        Value::Int(self.map(i64::from))
    }
    fn set(&mut self, v: Value<'_>) -> Result<(), String> {
        *self = match v {
            Value::Int(i) => i
                .map(|i| u32::try_from(i).map_err(|_| format!("{i} is out of range")))
                .transpose()?,
            Value::Text(None) | Value::Real(None) => None,
            other => return Err(mismatch("a whole number or null", other)),
        };
        Ok(())
    }
}

impl FieldType for Option<f64> {
    fn value(&self) -> Value<'_> {
        Value::Real(*self)
    }
    fn set(&mut self, v: Value<'_>) -> Result<(), String> {
        *self = match v {
            Value::Real(x) => x,
            Value::Int(i) => i.map(|i| i as f64),
            Value::Text(None) => None,
            other => return Err(mismatch("a number or null", other)),
        };
        Ok(())
    }
}

impl FieldType for f64 {
    fn value(&self) -> Value<'_> {
        Value::Real(Some(*self))
    }
    fn set(&mut self, v: Value<'_>) -> Result<(), String> {
        *self = match v {
            Value::Real(Some(x)) => x,
            Value::Int(Some(i)) => i as f64,
            other => return Err(mismatch("a number", other)),
        };
        Ok(())
    }
}

impl FieldType for bool {
    fn value(&self) -> Value<'_> {
        Value::Bool(*self)
    }
    fn set(&mut self, v: Value<'_>) -> Result<(), String> {
        *self = match v {
            Value::Bool(b) => b,
            Value::Int(Some(i @ (0 | 1))) => i == 1,
            other => return Err(mismatch("a boolean", other)),
        };
        Ok(())
    }
}

/// One entry of a record's table: what the field is, and how to read and
/// write it on a record of type `R`.
pub struct Column<R: 'static> {
    /// The field.
    pub field: Field,
    /// Its value on a record.
    pub get: for<'a> fn(&'a R) -> Value<'a>,
    /// Sets its value on a record.
    pub set: fn(&mut R, Value<'_>) -> Result<(), String>,
}

/// The column called `name` of `table`.
pub fn column<R>(table: &'static [Column<R>], name: &str) -> Option<&'static Column<R>> {
    table.iter().find(|c| c.field.name == name)
}

/// The index of the field called `name` in `fields`, at compile time (an
/// unknown name stops the build).
pub const fn index_of(fields: &[Field], name: &str) -> usize {
    let mut i = 0;
    while i < fields.len() {
        if const_eq(fields[i].name, name) {
            return i;
        }
        i += 1;
    }
    panic!("no such field in the table")
}

/// String equality usable in a `const fn`.
pub const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Declares a record: its struct, and beside it the associated consts
/// `FIELDS` (name, kind, unit and doc of each field, in order) and
/// `COLUMNS` (the same with a getter and setter each).
///
/// Each field is written as its serde attributes, then
/// `name: Type [Kind, "unit", "doc"]`; the doc becomes the field's doc
/// comment.
#[macro_export]
macro_rules! record_table {
    (
        $(#[$sattr:meta])*
        pub struct $rec:ident {
            $(
                $(#[$fattr:meta])*
                $name:ident : $ty:ty [$kind:ident, $unit:literal, $doc:literal]
            ),* $(,)?
        }
    ) => {
        $(#[$sattr])*
        pub struct $rec {
            $(
                #[doc = $doc]
                $(#[$fattr])*
                pub $name: $ty,
            )*
        }

        impl $rec {
            /// The fields, in order: name, kind, unit and doc.
            pub const FIELDS: &'static [$crate::fields::Field] = &[
                $($crate::fields::Field {
                    name: stringify!($name),
                    kind: $crate::fields::Kind::$kind,
                    unit: $unit,
                    doc: $doc,
                }),*
            ];

            /// The fields with their getters and setters, in order.
            pub const COLUMNS: &'static [$crate::fields::Column<$rec>] = &[
                $($crate::fields::Column {
                    field: $rec::FIELDS[$crate::fields::index_of($rec::FIELDS, stringify!($name))],
                    get: {
                        fn get(r: &$rec) -> $crate::fields::Value<'_> {
                            $crate::fields::FieldType::value(&r.$name)
                        }
                        get
                    },
                    set: {
                        fn set(r: &mut $rec, v: $crate::fields::Value<'_>) -> Result<(), String> {
                            $crate::fields::FieldType::set(&mut r.$name, v)
                        }
                        set
                    },
                }),*
            ];
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_convert_as_stores_give_them() {
        let mut x: Option<f64> = None;
        x.set(Value::Int(Some(3))).unwrap();
        assert_eq!(x, Some(3.0));
        let mut n: Option<u32> = Some(1);
        n.set(Value::Int(None)).unwrap();
        assert_eq!(n, None);
        assert!(n.set(Value::Int(Some(-1))).is_err());
        assert!(n.set(Value::Real(Some(1.5))).is_err());
        let mut s = String::new();
        assert!(s.set(Value::Text(None)).is_err(), "a required string");
        s.set(Value::Text(Some("a"))).unwrap();
        assert_eq!(s.value(), Value::Text(Some("a")));
        let mut b = false;
        b.set(Value::Int(Some(1))).unwrap();
        assert!(b);
        assert!(b.set(Value::Int(Some(2))).is_err());
    }
}
