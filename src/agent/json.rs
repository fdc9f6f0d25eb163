//! Finding an agent's JSON report in output that may also hold log lines.

use serde_json::Value;

/// The last JSON object in `buf` whose opening brace starts a line and that `accept`s.
///
/// Agents print log lines before (and sometimes after) their JSON, and pretty-print it
/// over many lines; nested objects never start at column 0, top-level ones do. Objects
/// indented as a whole are tried when no column-0 object is accepted.
pub fn last_json_object(buf: &[u8], accept: impl Fn(&Value) -> bool) -> Option<Value> {
    let starts: Vec<(usize, bool)> = line_starts(buf)
        .filter_map(|i| {
            let indent = buf[i..]
                .iter()
                .take_while(|b| **b == b' ' || **b == b'\t')
                .count();
            (buf.get(i + indent) == Some(&b'{')).then_some((i + indent, indent == 0))
        })
        .collect();
    for column_zero in [true, false] {
        for &(start, at_zero) in starts.iter().rev() {
            if at_zero != column_zero {
                continue;
            }
            let mut stream =
                serde_json::Deserializer::from_slice(&buf[start..]).into_iter::<Value>();
            if let Some(Ok(v)) = stream.next()
                && v.is_object()
                && accept(&v)
            {
                return Some(v);
            }
        }
    }
    None
}

/// Every JSON object that stands alone on a line (JSON Lines), in order; other lines skipped.
pub fn json_lines(buf: &[u8]) -> impl Iterator<Item = Value> + '_ {
    buf.split(|b| *b == b'\n').filter_map(|line| {
        let line = line.trim_ascii();
        if line.first() == Some(&b'{') {
            serde_json::from_slice::<Value>(line)
                .ok()
                .filter(Value::is_object)
        } else {
            None
        }
    })
}

fn line_starts(buf: &[u8]) -> impl Iterator<Item = usize> + '_ {
    std::iter::once(0).chain(
        buf.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1)
            .filter(move |i| *i < buf.len()),
    )
}

/// The value at a dotted path (`result.cost_usd`, `items.0.id`), if any.
pub fn at_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |cur, key| match cur {
        Value::Object(m) => m.get(key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRETTY: &str = r#"{
  "status": "success",
  "stop_reason": "llm_done",
  "steps": 1,
  "costs": {
    "total_cost_usd": 0.007
  },
  "cost": 0.007
}
"#;

    #[test]
    fn finds_pretty_json_after_log_lines() {
        let out = format!(
            "12:00:01 - LiteLLM:DEBUG: {{\"model\": \"gpt-4o\"}}\n{{\"level\":\"debug\"}}\n{PRETTY}"
        );
        let v = last_json_object(out.as_bytes(), |v| v.get("status").is_some()).unwrap();
        assert_eq!(v["status"], "success");
        assert_eq!(v["cost"], 0.007);
    }

    #[test]
    fn log_lines_after_the_report_do_not_hide_it() {
        let out = format!("{PRETTY}{{\"level\":\"info\",\"msg\":\"bye\"}}\nplain tail\n");
        let v = last_json_object(out.as_bytes(), |v| v.get("status").is_some()).unwrap();
        assert_eq!(v["stop_reason"], "llm_done");
    }

    #[test]
    fn garbage_and_truncation_give_none() {
        assert!(last_json_object(b"", |_| true).is_none());
        assert!(last_json_object(b"no json here\n{ broken", |_| true).is_none());
        assert!(last_json_object(&PRETTY.as_bytes()[..40], |_| true).is_none());
        assert!(last_json_object(&[0xff, 0xfe, b'{', b'}'], |_| true).is_none());
    }

    #[test]
    fn json_lines_skips_noise() {
        let out = b"{\"type\":\"a\"}\nnoise\n  {\"type\":\"b\"}\n[1]\n{bad\n";
        let types: Vec<String> = json_lines(out)
            .map(|v| v["type"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(types, vec!["a", "b"]);
    }
}
