//! The part of Go's `text/template` that `crictl ... -o go-template --template T` is used with, over
//! the decoded JSON crictl hands its templates (numbers kept as `json.Number`, missing keys an error).
//!
//! Supported: text; `{{pipeline}}`; `{{- ` and ` -}}` trimming; `{{/* comments */}}`; `if`/`else if`/
//! `else`, `range` (arrays, and maps in key order) and `with`, each with `else`; fields `.a.b`, `.`,
//! `$`, `$.a`, `(pipeline).a`; string, number and boolean literals and `nil`; pipes `x | f`; crictl's
//! functions `json`, `title`, `lower`, `upper` and Go's `index`, `len`, `not`, `and`, `or`, `eq`, `ne`,
//! `print`, `println`. Anything else (variables other than `$`, `define`, `template`, `printf`, ...)
//! is refused by name when the template is parsed, never silently printed wrong.

use serde_json::Value;
use thiserror::Error;

use super::gofmt;

#[derive(Debug, Error)]
pub enum TemplateError {
    #[error("parsing the template: {0}")]
    Parse(String),
    #[error("executing the template at <{action}>: {message}")]
    Execute { action: String, message: String },
}

/// A parsed template.
#[derive(Debug)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Debug)]
enum Node {
    Text(String),
    Action { source: String, pipe: Pipeline },
    Block { kind: BlockKind, source: String, pipe: Pipeline, then: Vec<Node>, otherwise: Vec<Node> },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BlockKind {
    If,
    Range,
    With,
}

#[derive(Debug, Clone)]
struct Pipeline(Vec<Command>);

#[derive(Debug, Clone)]
struct Command(Vec<Term>);

#[derive(Debug, Clone)]
enum Term {
    /// `.a.b` (empty: `.`).
    Dot(Vec<String>),
    /// `$` or `$.a.b`.
    Root(Vec<String>),
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Nil,
    Func(String),
    /// `(pipeline)` with fields after it.
    Paren(Pipeline, Vec<String>),
}

const FUNCTIONS: &[&str] = &["json", "title", "lower", "upper", "index", "len", "not", "and", "or", "eq", "ne", "print", "println"];

/// A value during execution: decoded JSON, or a number written in the template (Go's `int` or
/// `float64`, which differ from the data's `json.Number`, a string kind).
#[derive(Debug, Clone)]
enum Val {
    Json(Value),
    Int(i64),
    Float(f64),
}

impl Template {
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let pieces = split(text)?;
        let mut stack: Vec<Frame> = vec![Frame::root()];
        for piece in pieces {
            match piece {
                Piece::Text(t) => stack.last_mut().expect("root frame").push(Node::Text(t)),
                Piece::Action(source) => {
                    let tokens = lex(&source)?;
                    let keyword = match tokens.first() {
                        Some(Token::Ident(k)) => k.as_str(),
                        _ => "",
                    };
                    match keyword {
                        "if" | "range" | "with" => {
                            let kind = match keyword {
                                "if" => BlockKind::If,
                                "range" => BlockKind::Range,
                                _ => BlockKind::With,
                            };
                            let pipe = parse_pipeline(&tokens[1..], &source)?;
                            stack.push(Frame::block(kind, source.clone(), pipe, false));
                        }
                        "else" => {
                            let frame = stack.last_mut().filter(|f| f.kind.is_some()).ok_or_else(|| TemplateError::Parse(format!("unexpected {{{{{source}}}}}")))?;
                            if frame.in_else {
                                return Err(TemplateError::Parse(format!("{{{{{source}}}}} after {{{{else}}}}")));
                            }
                            frame.in_else = true;
                            match tokens.get(1) {
                                None => {}
                                Some(Token::Ident(k)) if k == "if" && frame.kind == Some(BlockKind::If) => {
                                    // `else if` opens an `if` inside the else branch, closed by the same `end`.
                                    let pipe = parse_pipeline(&tokens[2..], &source)?;
                                    stack.push(Frame::block(BlockKind::If, source.clone(), pipe, true));
                                }
                                Some(_) => return Err(TemplateError::Parse(format!("{{{{{source}}}}}: only `else` and `else if` are supported"))),
                            }
                        }
                        "end" => {
                            if tokens.len() > 1 {
                                return Err(TemplateError::Parse(format!("unexpected words in {{{{{source}}}}}")));
                            }
                            loop {
                                let frame = stack.pop().filter(|f| f.kind.is_some()).ok_or_else(|| TemplateError::Parse("unexpected {{end}}".into()))?;
                                let chained = frame.chained;
                                let node = frame.into_node();
                                stack.last_mut().expect("root frame").push(node);
                                if !chained {
                                    break;
                                }
                            }
                        }
                        "define" | "template" | "block" | "break" | "continue" => {
                            return Err(TemplateError::Parse(format!("{{{{{keyword}}}}} is not supported by faultlab-cri")));
                        }
                        _ => {
                            let pipe = parse_pipeline(&tokens, &source)?;
                            stack.last_mut().expect("root frame").push(Node::Action { source, pipe });
                        }
                    }
                }
            }
        }
        if stack.len() > 1 {
            let open = stack.last().map(|f| f.source.clone()).unwrap_or_default();
            return Err(TemplateError::Parse(format!("{{{{{open}}}}} has no {{{{end}}}}")));
        }
        Ok(Template { nodes: stack.pop().expect("root frame").then })
    }

    /// Run the template over `data` (`.` and `$`).
    pub fn execute(&self, data: &Value) -> Result<String, TemplateError> {
        let mut out = String::new();
        let root = Val::Json(data.clone());
        walk(&self.nodes, &root, &root, &mut out)?;
        Ok(out)
    }
}

struct Frame {
    kind: Option<BlockKind>,
    source: String,
    pipe: Option<Pipeline>,
    then: Vec<Node>,
    otherwise: Vec<Node>,
    in_else: bool,
    chained: bool,
}

impl Frame {
    fn root() -> Self {
        Frame { kind: None, source: String::new(), pipe: None, then: vec![], otherwise: vec![], in_else: false, chained: false }
    }

    fn block(kind: BlockKind, source: String, pipe: Pipeline, chained: bool) -> Self {
        Frame { kind: Some(kind), source, pipe: Some(pipe), then: vec![], otherwise: vec![], in_else: false, chained }
    }

    fn push(&mut self, node: Node) {
        if self.in_else { self.otherwise.push(node) } else { self.then.push(node) }
    }

    fn into_node(self) -> Node {
        Node::Block { kind: self.kind.expect("a block"), source: self.source, pipe: self.pipe.expect("a block's pipeline"), then: self.then, otherwise: self.otherwise }
    }
}

enum Piece {
    Text(String),
    Action(String),
}

/// Text and the insides of `{{ }}`, with `{{- ` / ` -}}` trimming applied and comments dropped.
fn split(text: &str) -> Result<Vec<Piece>, TemplateError> {
    let mut pieces = Vec::new();
    let mut rest = text;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let mut before = &rest[..start];
        if trim_next {
            before = before.trim_start();
        }
        let mut inside = &rest[start + 2..];
        let trim_before = inside.starts_with('-') && inside[1..].starts_with([' ', '\t', '\r', '\n']);
        if trim_before {
            before = before.trim_end();
            inside = &inside[1..];
        }
        if !before.is_empty() {
            pieces.push(Piece::Text(before.to_string()));
        }
        let end = find_close(inside).ok_or_else(|| TemplateError::Parse(format!("unclosed action: {{{{{}", inside.chars().take(40).collect::<String>())))?;
        let mut action = &inside[..end];
        trim_next = action.ends_with('-') && action[..action.len() - 1].ends_with([' ', '\t', '\r', '\n']);
        if trim_next {
            action = &action[..action.len() - 1];
        }
        let action = action.trim();
        if action.starts_with("/*") {
            if !action.ends_with("*/") {
                return Err(TemplateError::Parse(format!("unclosed comment: {{{{{action}}}}}")));
            }
        } else {
            pieces.push(Piece::Action(action.to_string()));
        }
        rest = &inside[end + 2..];
    }
    let mut tail = rest;
    if trim_next {
        tail = tail.trim_start();
    }
    if !tail.is_empty() {
        pieces.push(Piece::Text(tail.to_string()));
    }
    Ok(pieces)
}

/// The offset of the `}}` that closes an action, outside string literals.
fn find_close(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) => {
                if b == b'\\' && q != b'`' {
                    i += 1;
                } else if b == q {
                    quote = None;
                }
            }
            None => {
                if b == b'"' || b == b'`' || b == b'\'' {
                    quote = Some(b);
                } else if b == b'}' && bytes.get(i + 1) == Some(&b'}') {
                    return Some(i);
                }
            }
        }
        i += 1;
    }
    None
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Field(Vec<String>),
    Root(Vec<String>),
    Str(String),
    Number(String),
    Ident(String),
    Pipe,
    Open,
    /// `)` with the fields that follow it directly.
    Close(Vec<String>),
}

fn lex(source: &str) -> Result<Vec<Token>, TemplateError> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let unsupported = |what: &str| TemplateError::Parse(format!("{{{{{source}}}}}: {what} is not supported by faultlab-cri"));
    let fields = |i: &mut usize| -> Vec<String> {
        let mut names = Vec::new();
        while *i < chars.len() && chars[*i] == '.' && chars.get(*i + 1).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
            *i += 1;
            let start = *i;
            while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
                *i += 1;
            }
            names.push(chars[start..*i].iter().collect());
        }
        names
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' | '\n' => i += 1,
            '|' => {
                tokens.push(Token::Pipe);
                i += 1;
            }
            '(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            ')' => {
                i += 1;
                tokens.push(Token::Close(fields(&mut i)));
            }
            '.' if chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()) => {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | '_' | '+' | '-')) {
                    i += 1;
                }
                tokens.push(Token::Number(chars[start..i].iter().collect()));
            }
            '.' => {
                let names = fields(&mut i);
                if names.is_empty() {
                    i += 1;
                }
                tokens.push(Token::Field(names));
            }
            '$' => {
                i += 1;
                if chars.get(i).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
                    return Err(unsupported("a variable other than $"));
                }
                tokens.push(Token::Root(fields(&mut i)));
            }
            '"' => {
                i += 1;
                let mut s = String::new();
                loop {
                    let Some(&c) = chars.get(i) else { return Err(TemplateError::Parse(format!("unterminated string in {{{{{source}}}}}"))) };
                    i += 1;
                    match c {
                        '"' => break,
                        '\\' => {
                            let e = chars.get(i).copied().ok_or_else(|| TemplateError::Parse(format!("unterminated string in {{{{{source}}}}}")))?;
                            i += 1;
                            s.push(match e {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                '\\' => '\\',
                                '"' => '"',
                                other => return Err(TemplateError::Parse(format!("{{{{{source}}}}}: the escape \\{other} is not supported by faultlab-cri"))),
                            });
                        }
                        c => s.push(c),
                    }
                }
                tokens.push(Token::Str(s));
            }
            '`' => {
                let end = chars[i + 1..].iter().position(|&c| c == '`').ok_or_else(|| TemplateError::Parse(format!("unterminated raw string in {{{{{source}}}}}")))?;
                tokens.push(Token::Str(chars[i + 1..i + 1 + end].iter().collect()));
                i += end + 2;
            }
            '\'' => return Err(unsupported("a character constant")),
            c if c.is_ascii_digit() || ((c == '-' || c == '+') && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit() || *d == '.')) => {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | '_')) {
                    // An exponent sign: 1e+3.
                    i += 1;
                    if matches!(chars[i - 1], 'e' | 'E') && chars.get(i).is_some_and(|c| *c == '+' || *c == '-') && !chars[start..i].contains(&'x') {
                        i += 1;
                    }
                }
                tokens.push(Token::Number(chars[start..i].iter().collect()));
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                tokens.push(Token::Ident(chars[start..i].iter().collect()));
            }
            ':' | '=' => return Err(unsupported("a variable declaration")),
            other => return Err(TemplateError::Parse(format!("unexpected {other:?} in {{{{{source}}}}}"))),
        }
    }
    Ok(tokens)
}

fn parse_pipeline(tokens: &[Token], source: &str) -> Result<Pipeline, TemplateError> {
    let mut pos = 0;
    let pipe = parse_pipe(tokens, &mut pos, source)?;
    if pos != tokens.len() {
        return Err(TemplateError::Parse(format!("unexpected {:?} in {{{{{source}}}}}", tokens[pos])));
    }
    Ok(pipe)
}

fn parse_pipe(tokens: &[Token], pos: &mut usize, source: &str) -> Result<Pipeline, TemplateError> {
    let mut commands = vec![];
    loop {
        let mut terms = vec![];
        while let Some(token) = tokens.get(*pos) {
            if matches!(token, Token::Pipe | Token::Close(_)) {
                break;
            }
            *pos += 1;
            terms.push(match token {
                Token::Field(f) => Term::Dot(f.clone()),
                Token::Root(f) => Term::Root(f.clone()),
                Token::Str(s) => Term::Str(s.clone()),
                Token::Number(n) => parse_number(n, source)?,
                Token::Ident(name) => match name.as_str() {
                    "true" => Term::Bool(true),
                    "false" => Term::Bool(false),
                    "nil" => Term::Nil,
                    f if FUNCTIONS.contains(&f) => Term::Func(f.to_string()),
                    "if" | "range" | "with" | "else" | "end" | "define" | "template" | "block" | "break" | "continue" => {
                        return Err(TemplateError::Parse(format!("unexpected {name} in {{{{{source}}}}}")));
                    }
                    other => return Err(TemplateError::Parse(format!("function {other:?} not defined (faultlab-cri has {})", FUNCTIONS.join(", ")))),
                },
                Token::Open => {
                    let inner = parse_pipe(tokens, pos, source)?;
                    match tokens.get(*pos) {
                        Some(Token::Close(fields)) => {
                            *pos += 1;
                            Term::Paren(inner, fields.clone())
                        }
                        _ => return Err(TemplateError::Parse(format!("unclosed ( in {{{{{source}}}}}"))),
                    }
                }
                Token::Pipe | Token::Close(_) => unreachable!("stopped above"),
            });
        }
        if terms.is_empty() {
            return Err(TemplateError::Parse(format!("missing value in {{{{{source}}}}}")));
        }
        if terms.len() > 1 && !matches!(terms[0], Term::Func(_)) {
            return Err(TemplateError::Parse(format!("{{{{{source}}}}}: can't give arguments to a non-function")));
        }
        commands.push(Command(terms));
        match tokens.get(*pos) {
            Some(Token::Pipe) => *pos += 1,
            _ => break,
        }
    }
    Ok(Pipeline(commands))
}

fn parse_number(text: &str, source: &str) -> Result<Term, TemplateError> {
    let clean = text.replace('_', "");
    let (negative, digits) = match clean.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, clean.strip_prefix('+').unwrap_or(&clean)),
    };
    let radix = [("0x", 16), ("0X", 16), ("0o", 8), ("0O", 8), ("0b", 2), ("0B", 2)].into_iter().find(|(p, _)| digits.starts_with(p));
    let int = match radix {
        Some((prefix, radix)) => i64::from_str_radix(&digits[prefix.len()..], radix).ok(),
        None if digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit()) => i64::from_str_radix(&digits[1..], 8).ok(),
        None => digits.parse::<i64>().ok(),
    };
    if let Some(n) = int {
        return Ok(Term::Int(if negative { -n } else { n }));
    }
    clean.parse::<f64>().map(Term::Float).map_err(|_| TemplateError::Parse(format!("bad number {text:?} in {{{{{source}}}}}")))
}

fn walk(nodes: &[Node], dot: &Val, root: &Val, out: &mut String) -> Result<(), TemplateError> {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Action { source, pipe } => {
                let v = eval_pipe(pipe, dot, root).map_err(|message| TemplateError::Execute { action: source.clone(), message })?;
                out.push_str(&print_top(&v));
            }
            Node::Block { kind, source, pipe, then, otherwise } => {
                let v = eval_pipe(pipe, dot, root).map_err(|message| TemplateError::Execute { action: source.clone(), message })?;
                match kind {
                    BlockKind::If => walk(if truth(&v) { then } else { otherwise }, dot, root, out)?,
                    BlockKind::With => {
                        if truth(&v) {
                            walk(then, &v, root, out)?
                        } else {
                            walk(otherwise, dot, root, out)?
                        }
                    }
                    BlockKind::Range => {
                        let items: Vec<Val> = match &v {
                            Val::Json(Value::Array(a)) => a.iter().cloned().map(Val::Json).collect(),
                            Val::Json(Value::Object(m)) => gofmt::sorted(m).into_iter().map(|(_, v)| Val::Json(v.clone())).collect(),
                            Val::Json(Value::Null) => vec![],
                            other => {
                                return Err(TemplateError::Execute { action: source.clone(), message: format!("range can't iterate over {}", print(other)) });
                            }
                        };
                        if items.is_empty() {
                            walk(otherwise, dot, root, out)?;
                        }
                        for item in &items {
                            walk(then, item, root, out)?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn eval_pipe(pipe: &Pipeline, dot: &Val, root: &Val) -> Result<Val, String> {
    let mut last: Option<Val> = None;
    for Command(terms) in &pipe.0 {
        let value = match &terms[0] {
            Term::Func(name) => {
                let mut args = terms[1..].iter().map(|t| eval_term(t, dot, root)).collect::<Result<Vec<_>, _>>()?;
                args.extend(last.take());
                call(name, args)?
            }
            term => {
                if last.is_some() {
                    return Err("can't give argument to non-function".into());
                }
                eval_term(term, dot, root)?
            }
        };
        last = Some(value);
    }
    Ok(last.expect("a pipeline has a command"))
}

fn eval_term(term: &Term, dot: &Val, root: &Val) -> Result<Val, String> {
    Ok(match term {
        Term::Dot(fields) => lookup(dot.clone(), fields)?,
        Term::Root(fields) => lookup(root.clone(), fields)?,
        Term::Str(s) => Val::Json(Value::String(s.clone())),
        Term::Int(n) => Val::Int(*n),
        Term::Float(f) => Val::Float(*f),
        Term::Bool(b) => Val::Json(Value::Bool(*b)),
        Term::Nil => return Err("nil is not a command".into()),
        Term::Func(name) => call(name, vec![])?,
        Term::Paren(pipe, fields) => lookup(eval_pipe(pipe, dot, root)?, fields)?,
    })
}

fn lookup(mut value: Val, fields: &[String]) -> Result<Val, String> {
    for name in fields {
        value = match value {
            Val::Json(Value::Object(mut m)) => match m.remove(name) {
                Some(v) => Val::Json(v),
                None => return Err(format!("map has no entry for key {name:?}")),
            },
            Val::Json(Value::Null) => return Err(format!("nil pointer evaluating interface {{}}.{name}")),
            other => return Err(format!("can't evaluate field {name} in type {}", go_type(&other))),
        };
    }
    Ok(value)
}

fn go_type(v: &Val) -> &'static str {
    match v {
        Val::Json(Value::Null) => "interface {}",
        Val::Json(Value::Bool(_)) => "bool",
        Val::Json(Value::Number(_)) => "json.Number",
        Val::Json(Value::String(_)) => "string",
        Val::Json(Value::Array(_)) => "[]interface {}",
        Val::Json(Value::Object(_)) => "map[string]interface {}",
        Val::Int(_) => "int",
        Val::Float(_) => "float64",
    }
}

fn call(name: &str, args: Vec<Val>) -> Result<Val, String> {
    let arity = |n: usize| if args.len() == n { Ok(()) } else { Err(format!("wrong number of args for {name}: want {n} got {}", args.len())) };
    let string_arg = |v: &Val| match v {
        Val::Json(Value::String(s)) => Ok(s.clone()),
        other => Err(format!("wrong type for value; expected string; got {}", go_type(other))),
    };
    let text = |s: String| Ok(Val::Json(Value::String(s)));
    match name {
        "json" => {
            arity(1)?;
            text(format!("{}\n", gofmt::json(&to_json(&args[0]), None)))
        }
        "upper" => {
            arity(1)?;
            text(string_arg(&args[0])?.to_uppercase())
        }
        "lower" => {
            arity(1)?;
            text(string_arg(&args[0])?.to_lowercase())
        }
        "title" => {
            arity(1)?;
            let s = string_arg(&args[0])?;
            let mut out = String::new();
            let mut start = true;
            for c in s.chars() {
                if start && c.is_alphabetic() {
                    out.extend(c.to_uppercase());
                } else {
                    out.push(c);
                }
                start = !(c.is_alphanumeric() || c == '\'' || c == '_');
            }
            text(out)
        }
        "len" => {
            arity(1)?;
            let n = match &args[0] {
                Val::Json(Value::String(s)) => s.len(),
                Val::Json(Value::Number(n)) => n.to_string().len(),
                Val::Json(Value::Array(a)) => a.len(),
                Val::Json(Value::Object(m)) => m.len(),
                other => return Err(format!("len of type {}", go_type(other))),
            };
            Ok(Val::Int(n as i64))
        }
        "index" => {
            let mut args = args.into_iter();
            let mut value = args.next().ok_or("wrong number of args for index: want at least 1 got 0")?;
            for key in args {
                value = match (value, key) {
                    (Val::Json(Value::Object(mut m)), Val::Json(Value::String(k))) => Val::Json(m.remove(&k).unwrap_or(Value::Null)),
                    (Val::Json(Value::Array(a)), Val::Int(i)) => match usize::try_from(i).ok().and_then(|i| a.get(i)) {
                        Some(v) => Val::Json(v.clone()),
                        None => return Err(format!("error calling index: index out of range: {i}")),
                    },
                    (Val::Json(Value::Null), _) => return Err("error calling index: index of untyped nil".into()),
                    (v, k) => return Err(format!("error calling index: cannot index {} with {}", go_type(&v), go_type(&k))),
                };
            }
            Ok(value)
        }
        "not" => {
            arity(1)?;
            Ok(Val::Json(Value::Bool(!truth(&args[0]))))
        }
        "and" | "or" => {
            if args.is_empty() {
                return Err(format!("wrong number of args for {name}: want at least 1 got 0"));
            }
            let stop = |v: &Val| if name == "and" { !truth(v) } else { truth(v) };
            let n = args.len();
            Ok(args.into_iter().enumerate().find(|(i, v)| stop(v) || *i == n - 1).map(|(_, v)| v).expect("at least one argument"))
        }
        "eq" | "ne" => {
            if args.len() < 2 {
                return Err(format!("wrong number of args for {name}: want at least 2 got {}", args.len()));
            }
            let equal = if name == "eq" {
                let mut any = false;
                for other in &args[1..] {
                    any |= compare(&args[0], other)?;
                }
                any
            } else {
                arity(2)?;
                !compare(&args[0], &args[1])?
            };
            Ok(Val::Json(Value::Bool(equal)))
        }
        "print" | "println" => {
            // fmt.Sprint puts spaces between operands when neither is a string; Sprintln always.
            let mut out = String::new();
            for (i, a) in args.iter().enumerate() {
                let is_string = |v: &Val| matches!(v, Val::Json(Value::String(_) | Value::Number(_)));
                if i > 0 && (name == "println" || !(is_string(&args[i - 1]) || is_string(a))) {
                    out.push(' ');
                }
                out.push_str(&print(a));
            }
            if name == "println" {
                out.push('\n');
            }
            text(out)
        }
        other => Err(format!("function {other:?} not defined")),
    }
}

/// Go's `eq` on basic kinds: strings (json.Number is one) with strings, bools with bools, numbers
/// written in the template with each other.
fn compare(a: &Val, b: &Val) -> Result<bool, String> {
    let as_text = |v: &Val| match v {
        Val::Json(Value::String(s)) => Some(s.clone()),
        Val::Json(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    match (a, b) {
        (Val::Json(Value::Bool(x)), Val::Json(Value::Bool(y))) => Ok(x == y),
        (Val::Int(x), Val::Int(y)) => Ok(x == y),
        (Val::Float(x), Val::Float(y)) => Ok(x == y),
        (Val::Int(x), Val::Float(y)) | (Val::Float(y), Val::Int(x)) => Ok(*x as f64 == *y),
        _ => match (as_text(a), as_text(b)) {
            (Some(x), Some(y)) => Ok(x == y),
            _ => Err(format!("error calling eq: incompatible types for comparison ({} and {})", go_type(a), go_type(b))),
        },
    }
}

/// Go's `truth`: false, 0, nil and empty strings, arrays and maps are false (a `json.Number` is a
/// non-empty string, so true).
fn truth(v: &Val) -> bool {
    match v {
        Val::Json(Value::Null) => false,
        Val::Json(Value::Bool(b)) => *b,
        Val::Json(Value::Number(_)) => true,
        Val::Json(Value::String(s)) => !s.is_empty(),
        Val::Json(Value::Array(a)) => !a.is_empty(),
        Val::Json(Value::Object(m)) => !m.is_empty(),
        Val::Int(n) => *n != 0,
        Val::Float(f) => *f != 0.0,
    }
}

fn to_json(v: &Val) -> Value {
    match v {
        Val::Json(j) => j.clone(),
        Val::Int(n) => Value::from(*n),
        Val::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
    }
}

/// What `{{pipeline}}` writes: `fmt.Fprint`, with `<no value>` for a nil interface.
fn print_top(v: &Val) -> String {
    match v {
        Val::Json(Value::Null) => "<no value>".into(),
        other => print(other),
    }
}

/// `fmt`'s `%v` of decoded JSON: maps as `map[k:v ...]` in key order, slices as `[a b]`, nil `<nil>`.
fn print(v: &Val) -> String {
    match v {
        Val::Int(n) => n.to_string(),
        Val::Float(f) => gofmt::format_g(*f, None),
        Val::Json(j) => match j {
            Value::Null => "<nil>".into(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            Value::Array(a) => format!("[{}]", a.iter().map(|x| print(&Val::Json(x.clone()))).collect::<Vec<_>>().join(" ")),
            Value::Object(m) => {
                let entries: Vec<String> = gofmt::sorted(m).into_iter().map(|(k, x)| format!("{k}:{}", print(&Val::Json(x.clone())))).collect();
                format!("map[{}]", entries.join(" "))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(template: &str, data: &Value) -> String {
        Template::parse(template).unwrap_or_else(|e| panic!("{template}: {e}")).execute(data).unwrap_or_else(|e| panic!("{template}: {e}"))
    }

    #[test]
    fn fields_ranges_conditions_and_functions() {
        let data = json!({"status": {"id": "sha256:ab", "repoTags": ["b:1", "a:2"], "size": "2097152", "uid": null, "pinned": false},
                          "info": {"imageSpec": {"os": "linux", "n": 3}}});
        assert_eq!(run("{{.status.id}}", &data), "sha256:ab");
        assert_eq!(run("{{range .status.repoTags}}{{.}} {{end}}", &data), "b:1 a:2 ");
        assert_eq!(run("{{range $.status.repoTags -}}\n  [{{.}}]\n{{- end}}", &data), "[b:1][a:2]");
        assert_eq!(run("{{if .status.pinned}}pinned{{else if .status.uid}}uid{{else}}neither{{end}}", &data), "neither");
        assert_eq!(run("{{with .info.imageSpec}}{{.os}}{{end}}", &data), "linux");
        assert_eq!(run("{{.info.imageSpec}}", &data), "map[n:3 os:linux]");
        assert_eq!(run("{{.status.repoTags}} {{.status.uid}}", &data), "[b:1 a:2] <no value>");
        assert_eq!(run("{{json .info}}", &data), "{\"imageSpec\":{\"n\":3,\"os\":\"linux\"}}\n");
        assert_eq!(run("{{.info.imageSpec.os | upper}} {{index .status.repoTags 1}} {{len .status.repoTags}}", &data), "LINUX a:2 2");
        assert_eq!(run("{{(index .status.repoTags 0) | title}}", &data), "B:1");
        assert_eq!(run("{{if eq .status.size \"2097152\"}}yes{{end}}{{/* a comment */}}", &data), "yes");
        assert_eq!(run("{{if and .status.id (not .status.pinned)}}ok{{end}}", &data), "ok");
        assert_eq!(run("{{range .nothing}}x{{else}}none{{end}}", &json!({"nothing": []})), "none");
        assert_eq!(run("{{print .status.id 1 2}}", &data), "sha256:ab1 2");
    }

    #[test]
    fn missing_keys_and_unsupported_syntax_are_errors() {
        let data = json!({"status": {"id": "x"}});
        let err = Template::parse("{{.status.nope}}").unwrap().execute(&data).unwrap_err().to_string();
        assert!(err.contains("<.status.nope>") && err.contains("map has no entry for key \"nope\""), "{err}");
        let err = Template::parse("{{.status.id.more}}").unwrap().execute(&data).unwrap_err().to_string();
        assert!(err.contains("can't evaluate field more in type string"), "{err}");
        for (bad, why) in [
            ("{{$x := .status}}", "variable"),
            ("{{printf \"%s\" .}}", "\"printf\" not defined"),
            ("{{if .status}}", "has no {{end}}"),
            ("{{end}}", "unexpected {{end}}"),
            ("{{.status", "unclosed action"),
            ("{{template \"x\"}}", "not supported"),
        ] {
            let err = Template::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let err = Template::parse("{{upper .n}}").unwrap().execute(&json!({"n": 1})).unwrap_err().to_string();
        assert!(err.contains("expected string; got json.Number"), "{err}");
    }
}
