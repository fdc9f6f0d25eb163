//! A trimmed copy of GitHub's OpenAPI description, compiled for the loopback fakes
//! (`fake_github.rs`, `tests/support/fake_release.rs`): routing a request to its
//! operation, checking its parameters and JSON body, and checking the fake's own
//! responses against the documented schemas. The trimmed files and the script that
//! makes them are in `tests/openapi/`.
//!
//! A request body that is not JSON (a release asset upload) is checked for being
//! present when required and for having a content type; its bytes are the client's.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// One trimmed OpenAPI description, compiled.
pub struct Spec {
    pub operations: Vec<Operation>,
    /// Validator for undocumented error statuses (`basic-error`).
    basic_error: jsonschema::Validator,
    pub examples: Map<String, Value>,
}

/// One operation (method + path template) of the description.
pub struct Operation {
    pub id: String,
    pub method: String,
    pub template: String,
    segments: Vec<Segment>,
    params: Vec<Param>,
    body: Option<RequestBody>,
    /// Documented statuses; `None` when the response has no JSON content.
    responses: BTreeMap<u16, Option<jsonschema::Validator>>,
}

enum Segment {
    Literal(String),
    Param(String),
}

struct Param {
    name: String,
    location: String,
    required: bool,
    schema: Value,
}

struct RequestBody {
    required: bool,
    /// For a JSON body: the schema as published (unknown properties allowed, as in
    /// OpenAPI), and the same with `additionalProperties: false` at the top level.
    json: Option<(jsonschema::Validator, jsonschema::Validator)>,
}

/// Outcome of checking a request against the spec.
#[derive(Default)]
pub struct RequestCheck {
    pub violations: Vec<String>,
    /// Body properties the operation does not define (GitHub ignores them).
    pub unknown_properties: Vec<String>,
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

impl Spec {
    /// Compiles the description `json` (read from `name`, for messages).
    pub fn load(json: &str, name: &str) -> Spec {
        let doc: Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
        let defs: Map<String, Value> = doc["components"]["schemas"]
            .as_object()
            .expect("components.schemas")
            .iter()
            .map(|(name, schema)| (name.clone(), to_json_schema(schema)))
            .collect();
        let compile = |schema: &Value, strict: bool| -> jsonschema::Validator {
            let mut converted = to_json_schema(schema);
            if strict {
                forbid_unknown_properties(&mut converted);
            }
            let root = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$defs": defs,
                "allOf": [converted],
            });
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(false)
                .build(&root)
                .unwrap_or_else(|e| panic!("cannot compile schema {schema}: {e}"))
        };

        let mut operations = Vec::new();
        for (template, item) in doc["paths"].as_object().expect("paths") {
            let shared: Vec<Value> = item["parameters"]
                .as_array()
                .map(|a| a.iter().map(|p| resolve(&doc, p).clone()).collect())
                .unwrap_or_default();
            for (method, op) in item.as_object().expect("path item") {
                if !METHODS.contains(&method.as_str()) {
                    continue;
                }
                let mut raw_params = shared.clone();
                for p in op["parameters"].as_array().into_iter().flatten() {
                    let p = resolve(&doc, p).clone();
                    raw_params.retain(|q| !(q["name"] == p["name"] && q["in"] == p["in"]));
                    raw_params.push(p);
                }
                let params = raw_params
                    .iter()
                    .map(|p| Param {
                        name: p["name"].as_str().unwrap_or_default().to_string(),
                        location: p["in"].as_str().unwrap_or_default().to_string(),
                        required: p["required"].as_bool().unwrap_or(false),
                        schema: p["schema"].clone(),
                    })
                    .collect();
                let body = op.get("requestBody").map(|rb| {
                    let rb = resolve(&doc, rb);
                    let schema = &rb["content"]["application/json"]["schema"];
                    RequestBody {
                        required: rb["required"].as_bool().unwrap_or(false),
                        json: schema
                            .is_object()
                            .then(|| (compile(schema, false), compile(schema, true))),
                    }
                });
                let mut responses = BTreeMap::new();
                for (status, response) in op["responses"].as_object().expect("responses") {
                    let Ok(status) = status.parse::<u16>() else {
                        continue;
                    };
                    let response = resolve(&doc, response);
                    let schema = &response["content"]["application/json"]["schema"];
                    let validator = schema.is_object().then(|| compile(schema, false));
                    responses.insert(status, validator);
                }
                let segments = split_path(template)
                    .map(
                        |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                            Some(name) => Segment::Param(name.to_string()),
                            None => Segment::Literal(s.to_string()),
                        },
                    )
                    .collect();
                operations.push(Operation {
                    id: op["operationId"].as_str().expect("operationId").to_string(),
                    method: method.to_uppercase(),
                    template: template.clone(),
                    segments,
                    params,
                    body,
                    responses,
                });
            }
        }
        let basic_error = compile(&json!({"$ref": "#/components/schemas/basic-error"}), false);
        let examples = doc["components"]["examples"]
            .as_object()
            .expect("components.examples")
            .clone();
        Spec {
            operations,
            basic_error,
            examples,
        }
    }

    /// Finds the operation for `method` + `path`, returning decoded path params.
    pub fn route(
        &self,
        method: &str,
        path: &str,
    ) -> Result<(&Operation, BTreeMap<String, String>), String> {
        let segments: Vec<&str> = split_path(path).collect();
        let mut path_matched = Vec::new();
        for op in &self.operations {
            if op.segments.len() != segments.len() {
                continue;
            }
            let mut params = BTreeMap::new();
            let matches = op.segments.iter().zip(&segments).all(|(t, s)| match t {
                Segment::Literal(l) => l == s,
                Segment::Param(name) => {
                    params.insert(name.clone(), percent_decode(s, false));
                    !s.is_empty()
                }
            });
            if !matches {
                continue;
            }
            if op.method == method {
                return Ok((op, params));
            }
            path_matched.push(format!("{} ({})", op.method, op.id));
        }
        if path_matched.is_empty() {
            Err(format!(
                "{method} {path}: no path in the OpenAPI description matches"
            ))
        } else {
            Err(format!(
                "{method} {path}: method not in the OpenAPI description for this path (it has {})",
                path_matched.join(", ")
            ))
        }
    }

    pub fn check_request(
        &self,
        op: &Operation,
        path_params: &BTreeMap<String, String>,
        query: &[(String, String)],
        content_type: Option<&str>,
        raw_body: &[u8],
    ) -> RequestCheck {
        let mut check = RequestCheck::default();
        let out = &mut check.violations;
        for p in &op.params {
            let value = match p.location.as_str() {
                "path" => path_params.get(&p.name).cloned(),
                "query" => query
                    .iter()
                    .rev()
                    .find(|(k, _)| k == &p.name)
                    .map(|(_, v)| v.clone()),
                _ => continue,
            };
            match value {
                None if p.required => out.push(format!(
                    "required {} parameter `{}` is missing",
                    p.location, p.name
                )),
                None => {}
                Some(v) => {
                    if let Err(e) = check_param_value(&v, &p.schema) {
                        out.push(format!("{} parameter `{}`: {e}", p.location, p.name));
                    }
                }
            }
        }
        for (key, _) in query {
            if !op
                .params
                .iter()
                .any(|p| p.location == "query" && &p.name == key)
            {
                out.push(format!(
                    "query parameter `{key}` is not defined for this operation"
                ));
            }
        }
        let empty_body = raw_body.iter().all(u8::is_ascii_whitespace);
        match &op.body {
            None if !empty_body => out.push("this operation takes no request body".to_string()),
            None => {}
            Some(body) if empty_body && body.required => {
                out.push("the request body is required".to_string());
            }
            Some(_) if empty_body => {}
            Some(RequestBody { json: None, .. })
                if content_type.is_none_or(|ct| ct.trim().is_empty()) =>
            {
                out.push("a request body without a content-type".to_string());
            }
            Some(RequestBody { json: None, .. }) => {}
            Some(RequestBody {
                json: Some((validator, strict_validator)),
                ..
            }) => {
                let is_json = content_type.is_some_and(|ct| {
                    ct.split(';')
                        .next()
                        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
                });
                if !is_json {
                    out.push(format!(
                        "request body content-type must be application/json, got {content_type:?}"
                    ));
                }
                match serde_json::from_slice::<Value>(raw_body) {
                    Err(e) => out.push(format!("request body is not JSON: {e}")),
                    Ok(value) => {
                        for error in validator.iter_errors(&value) {
                            out.push(format!(
                                "request body{}: {error}",
                                pointer_or_root(&error.instance_path().to_string())
                            ));
                        }
                        if out.is_empty() {
                            for error in strict_validator.iter_errors(&value) {
                                check.unknown_properties.push(format!(
                                    "request body{}: {error}",
                                    pointer_or_root(&error.instance_path().to_string())
                                ));
                            }
                        }
                    }
                }
            }
        }
        check
    }

    pub fn check_response(&self, op: &Operation, status: u16, body: &Value) -> Vec<String> {
        let validator = match op.responses.get(&status) {
            Some(Some(v)) => v,
            Some(None) => return Vec::new(),
            None if status >= 400 => &self.basic_error,
            None => {
                return vec![format!("status {status} is not documented for {}", op.id)];
            }
        };
        validator
            .iter_errors(body)
            .map(|error| {
                format!(
                    "response body{}: {error}",
                    pointer_or_root(&error.instance_path().to_string())
                )
            })
            .collect()
    }
}

fn pointer_or_root(pointer: &str) -> String {
    if pointer.is_empty() {
        String::new()
    } else {
        format!(" at {pointer}")
    }
}

fn split_path(path: &str) -> impl Iterator<Item = &str> {
    path.strip_prefix('/').unwrap_or(path).split('/')
}

/// Follows a `#/components/<section>/<name>` reference (transitively).
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("unsupported $ref {reference}"));
            let target = doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("dangling $ref {reference}"));
            resolve(doc, target)
        }
        None => value,
    }
}

/// Converts an OpenAPI 3.0 schema object into a JSON Schema 2020-12 one:
/// `nullable: true` becomes a type union with "null" (or an `anyOf` with
/// `{"type": "null"}` when there is no `type`), component refs point into
/// `$defs`, and OpenAPI-only keywords are dropped.
fn to_json_schema(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in object {
        let converted = match key.as_str() {
            "nullable" | "example" | "externalDocs" | "xml" | "discriminator" | "readOnly"
            | "writeOnly" | "deprecated" => continue,
            k if k.starts_with("x-") => continue,
            "$ref" => {
                let reference = value.as_str().expect("$ref is a string");
                let name = reference
                    .strip_prefix("#/components/schemas/")
                    .unwrap_or_else(|| panic!("unsupported schema $ref {reference}"));
                Value::String(format!("#/$defs/{name}"))
            }
            "properties" | "patternProperties" => Value::Object(
                value
                    .as_object()
                    .expect("properties is an object")
                    .iter()
                    .map(|(name, s)| (name.clone(), to_json_schema(s)))
                    .collect(),
            ),
            "items" | "additionalProperties" | "not" => to_json_schema(value),
            "allOf" | "anyOf" | "oneOf" => Value::Array(
                value
                    .as_array()
                    .expect("composition is an array")
                    .iter()
                    .map(to_json_schema)
                    .collect(),
            ),
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    if object.get("nullable") == Some(&Value::Bool(true)) {
        if let Some(Value::Array(values)) = out.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
        match out.get("type").cloned() {
            Some(Value::String(t)) => {
                out.insert("type".into(), json!([t, "null"]));
            }
            Some(Value::Array(mut types)) => {
                if !types.contains(&json!("null")) {
                    types.push(json!("null"));
                }
                out.insert("type".into(), Value::Array(types));
            }
            _ => {
                return json!({"anyOf": [{"type": "null"}, Value::Object(out)]});
            }
        }
    }
    Value::Object(out)
}

/// For the strict request-body check: reject properties the operation does not
/// define (GitHub silently ignores them, which can hide client bugs such as
/// sending `draft` to `pulls/update`). Applied to the top level of the body
/// schema and its `oneOf`/`anyOf` branches only.
fn forbid_unknown_properties(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if object.contains_key("properties") && !object.contains_key("additionalProperties") {
        object.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = object.get_mut(key) {
            branches.iter_mut().for_each(forbid_unknown_properties);
        }
    }
}

fn check_param_value(value: &str, schema: &Value) -> Result<(), String> {
    match schema["type"].as_str() {
        Some("integer") if value.parse::<i64>().is_err() => {
            return Err(format!("`{value}` is not an integer"));
        }
        Some("number") if value.parse::<f64>().is_err() => {
            return Err(format!("`{value}` is not a number"));
        }
        Some("boolean") if value != "true" && value != "false" => {
            return Err(format!("`{value}` is not a boolean"));
        }
        _ => {}
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.iter().any(|a| match a {
            Value::String(s) => s == value,
            other => serde_json::from_str::<Value>(value).ok().as_ref() == Some(other),
        })
    {
        return Err(format!(
            "`{value}` is not one of {}",
            Value::Array(allowed.clone())
        ));
    }
    Ok(())
}

/// `a=1&b=x+y` → pairs, percent-decoded.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key, true), percent_decode(value, true))
        })
        .collect()
}

/// Decodes `%XX` (and `+` as a space, in a query).
pub fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
