//! Folding the reports of several runs into one: every number becomes the median of its
//! runs; everything else is taken from the first run.

use serde_json::Value;

/// The median report of `runs` (at least one), with `"runs"` set to how many there were.
pub fn median_report(runs: &[Value]) -> Value {
    let mut merged = fold(runs);
    if let Value::Object(map) = &mut merged {
        map.insert("runs".into(), Value::from(runs.len()));
    }
    merged
}

fn fold(values: &[Value]) -> Value {
    match values.first() {
        Some(Value::Object(first)) => Value::Object(
            first
                .iter()
                .map(|(key, _)| {
                    let column: Vec<Value> =
                        values.iter().map(|v| v[key.as_str()].clone()).collect();
                    (key.clone(), fold(&column))
                })
                .collect(),
        ),
        Some(Value::Number(first)) if first.is_f64() || values.iter().all(Value::is_number) => {
            let mut numbers: Vec<f64> = values.iter().filter_map(Value::as_f64).collect();
            numbers.sort_by(f64::total_cmp);
            let middle = numbers.len() / 2;
            let median = if numbers.len() % 2 == 1 {
                numbers[middle]
            } else {
                (numbers[middle - 1] + numbers[middle]) / 2.0
            };
            if first.is_f64() {
                Value::from(median)
            } else {
                Value::from(median.round() as u64)
            }
        }
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_become_medians_and_text_is_kept() {
        let runs = [
            json!({"op": "x", "p50": 3.0, "n": 10, "inner": {"v": 1.0}}),
            json!({"op": "x", "p50": 1.0, "n": 30, "inner": {"v": 5.0}}),
            json!({"op": "x", "p50": 2.0, "n": 20, "inner": {"v": 3.0}}),
        ];
        let merged = median_report(&runs);
        assert_eq!(merged["p50"], 2.0);
        assert_eq!(merged["n"], 20);
        assert_eq!(merged["inner"]["v"], 3.0);
        assert_eq!(merged["op"], "x");
        assert_eq!(merged["runs"], 3);
    }
}
