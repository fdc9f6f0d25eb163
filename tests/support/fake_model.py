#!/usr/bin/env python3
"""A fake model server for agent CLIs, on 127.0.0.1 (python3 stdlib only).

Usage: fake_model.py [--log FILE] [--scenario JSON] [--lifetime SECONDS]
Prints the port it listens on as its first stdout line, then serves until killed
(or until --lifetime seconds, default 900, have passed: it never outlives a test).
The scenario may also come from $FAKE_MODEL_SCENARIO; the flag wins.

Wire formats, all with fixed token usage per response (see USAGE below):
  POST /v1/messages[?beta=true]      Anthropic Messages API, SSE when "stream": true (Claude Code)
  POST /v1/messages/count_tokens     {"input_tokens": N}
  POST /v1/chat/completions          OpenAI chat completions, stream or not (aider, architect via litellm)
  POST /v1/responses                 OpenAI Responses API SSE (codex)
  GET  /v1/models                    a model list (both vendors' shapes at once)
Anything else is answered 404 with a vendor-shaped error, and logged.

Scenario (JSON object):
  {"mode": "write" | "max_turns" | "api_error" | "hang", "max_tool_turns": 200,
   "input_tokens": 1000, "output_tokens": 100}
A prompt may pick its own mode with the marker `fake-scenario=MODE` anywhere in it, so
workers of one run can behave differently; otherwise the scenario's mode applies.
  write      the model asks the agent's file-writing tool to create the file named in
             the prompt ("create file NAME containing TEXT"; default fake-output.txt /
             "hello"), then, once the tool result is back, answers "Done." For aider (no
             tools) the answer itself is the file, in --edit-format whole (or a
             SEARCH/REPLACE block creating it, when aider asks for those). Codex
             gets an apply_patch call (through its JavaScript `exec` tool when that
             is all it offers).
  max_turns  the model calls the write tool on every turn (so some work is done), up to
             max_tool_turns (200) times per conversation, then says done. aider asks
             again only when its linter fails, so give it a file that does not lint
             (e.g. "create file x.py containing def (") and it reflects until its
             reflection limit, answered with the same edit each time.
  api_error  HTTP 400 with the vendor's error body ("fake-model: scripted API error");
             not 401: Claude Code hangs on 401.
  hang       the request is read and never answered (until the lifetime ends).
Requests that are not the agent's main loop (no write tool offered, e.g. Claude Code's
title generation, aider's commit messages) get a short text answer with the same usage.

USAGE: every model response reports input_tokens (default 1000) and output_tokens
(default 100), no cached tokens. The cost an agent derives is therefore
(number of responses) x (1000 x input price + 100 x output price) for its model.

Every request is appended to --log as one JSON line:
  {"seq", "t", "method", "path", "api", "model", "kind": "main"|"side"|"meta",
   "mode", "action": "tool"|"text"|"error"|"hang"|"meta", "turn", "file",
   "stream", "tools": [names], "usage": {"input_tokens", "output_tokens"} | null,
   "digest": first 16 hex of sha256(body),
   "key": the API key the request carried (x-api-key, else Authorization's bearer),
   "workers_seen": how many live processes fanout started for a worker (FANOUT_WORKTREE in
     the environment they started with) this server could read in /proc at the request,
   "workers_holding_key": the pids among them whose /proc environ or cmdline holds "key"}
`turn` is 1 + the number of assistant turns already in the conversation.
"""
import argparse
import hashlib
import http.server
import json
import os
import re
import sys
import threading
import time
import uuid

parser = argparse.ArgumentParser()
parser.add_argument("--log", default=None)
parser.add_argument("--scenario", default=None)
parser.add_argument("--lifetime", type=float, default=900.0)
parser.add_argument("--dump", default=None, help="directory to save each request body in (debugging)")
ARGS = parser.parse_args()

SCENARIO = json.loads(ARGS.scenario or os.environ.get("FAKE_MODEL_SCENARIO") or "{}")
MODES = ("write", "max_turns", "api_error", "hang")
DEFAULT_MODE = SCENARIO.get("mode", "write")
if DEFAULT_MODE not in MODES:
    sys.exit(f"fake_model: unknown mode {DEFAULT_MODE!r}; one of {MODES}")
IN_TOK = int(SCENARIO.get("input_tokens", 1000))
OUT_TOK = int(SCENARIO.get("output_tokens", 100))
MAX_TOOL_TURNS = int(SCENARIO.get("max_tool_turns", 200))
ERROR_MESSAGE = "fake-model: scripted API error"

LOCK = threading.Lock()
SEQ = [0]

TASK_RE = re.compile(r"create (?:a )?file\s+[`'\"]?([\w./-]+?)[`'\"]?\s+containing\s+(.+)", re.I)
MODE_RE = re.compile(r"fake-scenario=(\w+)")
CWD_RES = [  # most specific first
    re.compile(r"Primary working directory:\s*(/[^\s`'\"]+)"),
    re.compile(r"<cwd>(/[^<]+)</cwd>"),
    re.compile(r"working directory:\s*(/[^\s`'\"]+)", re.I),
]
AIDER_RE = re.compile(r"Act as an expert software developer")
WRITE_TOOLS = ("Write", "write_file", "create_file", "write", "edit_file")


def log(entry):
    with LOCK:
        SEQ[0] += 1
        entry = {"seq": SEQ[0], "t": round(time.time(), 3), **entry}
        if ARGS.log:
            with open(ARGS.log, "a") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")
        return entry["seq"]


def proc_view(key):
    """The live worker processes (FANOUT_WORKTREE in their environ) and those whose
    environ or command line holds `key`, as /proc shows them now."""
    seen, holding = 0, []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"FANOUT_WORKTREE=" not in env:
            continue
        seen += 1
        if key and key.encode() in env + cmdline:
            holding.append(int(pid))
    return seen, holding


def texts(content):
    """All text in a message content (string, or list of blocks of any vendor)."""
    if isinstance(content, str):
        return [content]
    out = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, str):
                out.append(b)
            elif isinstance(b, dict):
                for key in ("text", "input_text", "content"):
                    v = b.get(key)
                    if isinstance(v, str):
                        out.append(v)
                    elif isinstance(v, list):
                        out.extend(texts(v))
    return out


def task_of(user_texts):
    """(file, content, mode) from the last user text naming a file to create."""
    name, body, mode = "fake-output.txt", "hello", DEFAULT_MODE
    found = False
    for t in user_texts:
        m = TASK_RE.search(t)
        if m:
            found = True
            name = m.group(1)
            body = MODE_RE.sub("", m.group(2)).strip().splitlines()[0].strip().strip("`'\"")
            body = body.rstrip(".").strip() or "hello"
        mm = MODE_RE.search(t)
        if mm and mm.group(1) in MODES:
            mode = mm.group(1)
        if found and mm:
            break
    return name, body + "\n", mode


def cwd_of(all_texts):
    """The agent's working directory, as its prompt states it (an existing directory)."""
    for r in CWD_RES:
        for t in all_texts:
            for m in r.finditer(t):
                path = m.group(1).rstrip(".,")
                if os.path.isdir(path):
                    return path
    return None


def usage_anthropic():
    return {"input_tokens": IN_TOK, "output_tokens": OUT_TOK,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:24]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    # ---- plumbing ----
    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            return data
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", new_id("req_"))
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", new_id("req_"))
        self.end_headers()
        self.close_connection = True

    def sse(self, event, data):
        chunk = ""
        if event:
            chunk += f"event: {event}\n"
        chunk += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        self.wfile.write(chunk.encode())
        self.wfile.flush()

    def hang(self):
        # Never answer; bounded by the server's lifetime.
        self.close_connection = True
        time.sleep(max(ARGS.lifetime, 1))

    def error(self, api, status=400, message=ERROR_MESSAGE):
        if api == "anthropic":
            self.send_json(status, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})
        else:
            self.send_json(status, {"error": {"message": message, "type": "invalid_request_error",
                                              "param": None, "code": "fake_error"}})

    def record(self, req, **kw):
        auth = self.headers.get("Authorization") or ""
        key = self.headers.get("x-api-key") or (auth[7:] if auth.startswith("Bearer ") else auth)
        seen, holding = proc_view(key)
        entry = {"method": self.command, "path": self.path,
                 "digest": hashlib.sha256(req).hexdigest()[:16], "key": key,
                 "workers_seen": seen, "workers_holding_key": holding}
        entry.update(kw)
        seq = log(entry)
        if ARGS.dump:
            os.makedirs(ARGS.dump, exist_ok=True)
            with open(os.path.join(ARGS.dump, f"{seq:04d}-{kw.get('api', 'x')}.json"), "wb") as f:
                f.write(req)

    # ---- routing ----
    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models"):
            self.record(b"", api="meta", kind="meta", action="meta", usage=None)
            models = ["fake-model", "claude-sonnet-4-5", "gpt-4o-mini", "gpt-5-codex"]
            self.send_json(200, {
                "object": "list",
                "data": [{"id": m, "object": "model", "type": "model", "created": 0, "owned_by": "fake",
                          "display_name": m, "created_at": "2025-01-01T00:00:00Z"} for m in models],
                "models": [],
                "has_more": False, "first_id": models[0], "last_id": models[-1],
            })
            return
        self.record(b"", api="other", kind="meta", action="404", usage=None)
        self.error("openai", 404, f"fake-model: no route {self.path}")

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        raw = self.body()
        path = self.path.split("?")[0].rstrip("/")
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            req = {}
        if path.endswith("/messages/count_tokens"):
            self.record(raw, api="anthropic", kind="meta", action="meta", model=req.get("model"), usage=None)
            self.send_json(200, {"input_tokens": IN_TOK})
        elif path.endswith("/messages"):
            self.anthropic(raw, req)
        elif path.endswith("/chat/completions"):
            self.chat(raw, req)
        elif path.endswith("/responses"):
            self.openai_responses(raw, req)
        else:
            self.record(raw, api="other", kind="meta", action="404", usage=None)
            self.error("openai", 404, f"fake-model: no route {self.path}")

    # ---- the "model" ----
    def decide(self, api, raw, req, *, tools, user_texts, all_texts, assistant_turns, after_tool, main):
        """What to answer: ("tool"|"text"|"error"|"hang", file, content, mode)."""
        name, content, mode = task_of(user_texts)
        common = dict(api=api, model=req.get("model"), stream=bool(req.get("stream")),
                      tools=tools, turn=assistant_turns + 1)
        if mode == "api_error" and main:
            self.record(raw, kind="main", mode=mode, action="error", file=name, usage=None, **common)
            return "error", name, content, mode
        if mode == "hang":
            self.record(raw, kind="main" if main else "side", mode=mode, action="hang", file=name,
                        usage=None, **common)
            return "hang", name, content, mode
        if not main:
            action = "text"
        elif mode == "write":
            action = "text" if after_tool else "tool"
        else:  # max_turns
            action = "tool" if assistant_turns < MAX_TOOL_TURNS else "text"
        self.record(raw, kind="main" if main else "side", mode=mode, action=action, file=name,
                    usage={"input_tokens": IN_TOK, "output_tokens": OUT_TOK}, **common)
        return action, name, content, mode

    # ---- Anthropic Messages ----
    def anthropic(self, raw, req):
        msgs = req.get("messages") or []
        tools = [t.get("name") for t in req.get("tools") or [] if isinstance(t, dict)]
        user_texts = []
        for m in msgs:
            if m.get("role") == "user":
                user_texts.extend(texts(m.get("content")))
        all_texts = texts(req.get("system"))
        for m in msgs:  # the environment block may come in a "system" message
            if m.get("role") != "assistant":
                all_texts.extend(texts(m.get("content")))
        last = msgs[-1] if msgs else {}
        after_tool = last.get("role") == "user" and isinstance(last.get("content"), list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in last["content"])
        assistant_turns = sum(1 for m in msgs if m.get("role") == "assistant")
        main = "Write" in tools
        action, name, content, mode = self.decide(
            "anthropic", raw, req, tools=tools, user_texts=user_texts, all_texts=all_texts,
            assistant_turns=assistant_turns, after_tool=after_tool, main=main)
        if action == "error":
            return self.error("anthropic")
        if action == "hang":
            return self.hang()
        model = req.get("model") or "fake-model"
        if action == "tool":
            cwd = cwd_of(all_texts) or os.getcwd()
            block = {"type": "tool_use", "id": new_id("toolu_"), "name": "Write",
                     "input": {"file_path": os.path.join(cwd, name), "content": content}}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": "Done." if main else "Fake title"}
            stop = "end_turn"
        msg = {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
               "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage_anthropic()}
        if not req.get("stream"):
            return self.send_json(200, msg)
        self.start_sse()
        start = dict(msg, content=[], stop_reason=None, usage=dict(usage_anthropic(), output_tokens=1))
        self.sse("message_start", {"type": "message_start", "message": start})
        if block["type"] == "text":
            self.sse("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}})
            self.sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": block["text"]}})
        else:
            self.sse("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": dict(block, input={})})
            self.sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "input_json_delta",
                                                       "partial_json": json.dumps(block["input"])}})
        self.sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        self.sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": OUT_TOK}})
        self.sse("message_stop", {"type": "message_stop"})

    # ---- OpenAI chat completions ----
    def chat(self, raw, req):
        msgs = req.get("messages") or []
        tool_defs = [t for t in req.get("tools") or [] if isinstance(t, dict)]
        tools = [(t.get("function") or {}).get("name") for t in tool_defs]
        user_texts = []
        for m in msgs:
            if m.get("role") == "user":
                user_texts.extend(texts(m.get("content")))
        sys_texts = []
        for m in msgs:
            if m.get("role") == "system":
                sys_texts.extend(texts(m.get("content")))
        write_tool = next((t for t in tool_defs if (t.get("function") or {}).get("name") in WRITE_TOOLS), None)
        # aider offers no tools: it asks for edits in its own text format
        aider = not tool_defs and any(AIDER_RE.search(t) for t in sys_texts)
        commit_msg = any("commit message" in t.lower() for t in sys_texts)
        main = write_tool is not None or aider
        last = msgs[-1] if msgs else {}
        after_tool = last.get("role") == "tool"
        assistant_turns = sum(1 for m in msgs if m.get("role") == "assistant")
        if aider:
            # aider's prompt carries example exchanges first; count only after the task
            after_tool = False
            assistant_turns = 0
            seen = False
            for m in msgs:
                if m.get("role") == "user" and any(TASK_RE.search(t) for t in texts(m.get("content"))):
                    seen, assistant_turns = True, 0
                elif seen and m.get("role") == "assistant":
                    assistant_turns += 1
            after_tool = assistant_turns > 0
        action, name, content, mode = self.decide(
            "chat", raw, req, tools=tools, user_texts=user_texts, all_texts=sys_texts + user_texts,
            assistant_turns=assistant_turns, after_tool=after_tool, main=main)
        if action == "error":
            return self.error("openai")
        if action == "hang":
            return self.hang()
        model = req.get("model") or "fake-model"
        message = {"role": "assistant", "content": None}
        finish = "stop"
        if action == "tool" and write_tool is not None:
            fn = write_tool["function"]
            props = ((fn.get("parameters") or {}).get("properties") or {})
            args = {}
            path_key = next((k for k in ("path", "file_path", "filename", "file") if k in props), "path")
            content_key = next((k for k in ("content", "contents", "text") if k in props), "content")
            args[path_key] = name
            args[content_key] = content
            message["tool_calls"] = [{"id": new_id("call_"), "type": "function",
                                      "function": {"name": fn["name"], "arguments": json.dumps(args)}}]
            finish = "tool_calls"
        elif action == "tool":  # aider: the answer is the edit (the same on every turn)
            if any("SEARCH/REPLACE" in t for t in sys_texts):  # aider's diff formats
                message["content"] = (f"{name}\n```\n<<<<<<< SEARCH\n=======\n{content}"
                                      ">>>>>>> REPLACE\n```\n")
            else:  # --edit-format whole
                message["content"] = f"{name}\n```\n{content}```\n"
        else:
            message["content"] = "fake: commit message" if commit_msg and not main else "Done."
        usage = {"prompt_tokens": IN_TOK, "completion_tokens": OUT_TOK, "total_tokens": IN_TOK + OUT_TOK,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        cid, created = new_id("chatcmpl-"), int(time.time())
        if not req.get("stream"):
            return self.send_json(200, {"id": cid, "object": "chat.completion", "created": created, "model": model,
                                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                        "usage": usage})
        self.start_sse()

        def chunk(delta, finish_reason=None, **extra):
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}

        self.sse(None, chunk({"role": "assistant", "content": ""}))
        if message.get("tool_calls"):
            tc = message["tool_calls"][0]
            self.sse(None, chunk({"tool_calls": [{"index": 0, "id": tc["id"], "type": "function",
                                                  "function": {"name": tc["function"]["name"], "arguments": ""}}]}))
            self.sse(None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": tc["function"]["arguments"]}}]}))
        else:
            self.sse(None, chunk({"content": message["content"]}))
        include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
        if include_usage:
            self.sse(None, chunk({}, finish))
            self.sse(None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                            "choices": [], "usage": usage})
        else:
            self.sse(None, chunk({}, finish, usage=usage))
        self.sse(None, "[DONE]")

    # ---- OpenAI Responses (codex) ----
    def openai_responses(self, raw, req):
        items = req.get("input") or []
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        # codex offers tools in `tools` and (newer versions) in `additional_tools` input
        # items, grouped in namespaces
        tool_defs = []

        def collect(ts):
            for t in ts or []:
                if not isinstance(t, dict):
                    continue
                if t.get("type") == "namespace":
                    collect(t.get("tools"))
                else:
                    tool_defs.append(t)

        collect(req.get("tools"))
        for it in items:
            if it.get("type") == "additional_tools":
                collect(it.get("tools"))
        tools = [t.get("name") or (t.get("function") or {}).get("name") or t.get("type") for t in tool_defs]
        user_texts = []
        for it in items:
            if it.get("role") == "user":
                user_texts.extend(texts(it.get("content")))
        instr = req.get("instructions")
        all_texts = ([instr] if isinstance(instr, str) else []) + user_texts
        last_user = max((i for i, it in enumerate(items) if it.get("role") == "user"), default=-1)
        after_tool = any(it.get("type") in ("function_call_output", "custom_tool_call_output")
                         for it in items[last_user + 1:])
        assistant_turns = sum(1 for it in items
                              if it.get("type") in ("function_call", "custom_tool_call")
                              or (it.get("type") == "message" and it.get("role") == "assistant"))
        main = bool(tool_defs)
        action, name, content, mode = self.decide(
            "responses", raw, req, tools=tools, user_texts=user_texts, all_texts=all_texts,
            assistant_turns=assistant_turns, after_tool=after_tool, main=main)
        if action == "error":
            return self.error("openai")
        if action == "hang":
            return self.hang()
        model = req.get("model") or "fake-model"
        rid = new_id("resp_")
        if action == "tool":
            patch = "*** Begin Patch\n*** Add File: " + name + "\n" + "".join(
                "+" + line + "\n" for line in content.splitlines()) + "*** End Patch\n"
            ap = next((t for t in tool_defs if t.get("name") == "apply_patch"), None)
            js = next((t for t in tool_defs if t.get("name") == "exec" and t.get("type") == "custom"), None)
            if ap is None and js is not None:
                # code mode: the model writes JavaScript that calls the nested tools
                item = {"type": "custom_tool_call", "id": new_id("ctc_"), "status": "completed",
                        "call_id": new_id("call_"), "name": "exec",
                        "input": f"const r = await tools.apply_patch({json.dumps(patch)});\ntext(r);\n"}
            elif ap is not None and ap.get("type") == "custom":
                item = {"type": "custom_tool_call", "id": new_id("ctc_"), "status": "completed",
                        "call_id": new_id("call_"), "name": "apply_patch", "input": patch}
            elif ap is not None:
                item = {"type": "function_call", "id": new_id("fc_"), "status": "completed",
                        "call_id": new_id("call_"), "name": "apply_patch",
                        "arguments": json.dumps({"input": patch})}
            else:
                shell = next((t for t in tools if t in ("shell", "shell_command", "exec_command")), "shell")
                args = ({"command": ["apply_patch", patch]} if shell == "shell"
                        else {"command": "apply_patch <<'EOF'\n" + patch + "EOF\n"} if shell == "shell_command"
                        else {"cmd": "apply_patch <<'EOF'\n" + patch + "EOF\n"})
                item = {"type": "function_call", "id": new_id("fc_"), "status": "completed",
                        "call_id": new_id("call_"), "name": shell, "arguments": json.dumps(args)}
        else:
            item = {"type": "message", "id": new_id("msg_"), "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Done." if main else "ok", "annotations": []}]}
        usage = {"input_tokens": IN_TOK, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": OUT_TOK, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": IN_TOK + OUT_TOK}
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
        if not req.get("stream", True):
            return self.send_json(200, dict(base, status="completed", output=[item], usage=usage))
        self.start_sse()
        self.sse("response.created", {"type": "response.created", "response": dict(base, status="in_progress")})
        self.sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                "item": item})
        self.sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item})
        self.sse("response.completed", {"type": "response.completed",
                                        "response": dict(base, status="completed", output=[item], usage=usage)})


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Timer(ARGS.lifetime, lambda: os._exit(0)).start()
server.serve_forever()
