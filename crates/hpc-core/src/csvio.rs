//! CSV output of records: flat JSON objects become rows under a header.

use std::io::Write;

use serde_json::{Map, Value};

use crate::error::Result;

/// Writes flat JSON objects as CSV with the given columns (absent fields are
/// empty cells; nested values are written as JSON text).
pub fn write_csv<W: Write>(out: W, columns: &[String], rows: &[Map<String, Value>]) -> Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(columns)?;
    for row in rows {
        w.write_record(columns.iter().map(|c| cell(row.get(c))))?;
    }
    w.flush()?;
    Ok(())
}

/// The CSV text of one JSON value.
pub fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads CSV rows back into JSON objects (numbers typed, empty cells
    /// absent): the inverse of [`write_csv`] for the round trip below.
    fn read_back(input: &[u8]) -> Vec<Map<String, Value>> {
        let mut r = csv::Reader::from_reader(input);
        let header: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
        r.records()
            .map(|rec| {
                let rec = rec.unwrap();
                let mut m = Map::new();
                for (k, v) in header.iter().zip(rec.iter()).filter(|(_, v)| !v.is_empty()) {
                    let val = if v == "true" || v == "false" {
                        Value::Bool(v == "true")
                    } else if let Ok(n) = v.parse::<i64>() {
                        Value::from(n)
                    } else if let Some(n) =
                        v.parse::<f64>().ok().and_then(serde_json::Number::from_f64)
                    {
                        Value::Number(n)
                    } else {
                        Value::String(v.to_owned())
                    };
                    m.insert(k.clone(), val);
                }
                m
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn csv_round_trip_keeps_every_field(name in "[a-z ,\"|]{1,12}", n in 0i64..1_000_000, x in 0.5f64..1e6) {
            let mut m = Map::new();
            m.insert("job_name".into(), Value::from(format!("j{name}")));
            m.insert("n".into(), Value::from(n));
            m.insert("x".into(), Value::from(x));
            m.insert("ok".into(), Value::Bool(true));
            let rows = vec![m];
            let cols: Vec<String> = rows[0].keys().cloned().collect();
            let mut out = Vec::new();
            write_csv(&mut out, &cols, &rows).unwrap();
            let back = read_back(&out);
            proptest::prop_assert_eq!(back, rows);
        }
    }
}
