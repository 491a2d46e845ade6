"""A minimal OpenAI-compatible chat endpoint over a local Hugging Face model, for judge tests.

`python -m rlvr.testing.chat_server MODEL_PATH [--port 0]` serves `POST /v1/chat/completions`
(greedy `generate`, `max_tokens` new tokens; the messages through the tokenizer's chat template
when it has one, else their contents joined) on 127.0.0.1 and prints `listening on
http://127.0.0.1:PORT/v1`. One request at a time (a lock around the model). A test harness: no
token, no streaming, no sampling parameters beyond `max_tokens`.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatModel:
    def __init__(self, path: str):
        from rlvr.models.policy import load_policy

        self.model, self.tokenizer = load_policy(path)
        self.model.eval()
        self.lock = threading.Lock()

    def reply(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        import torch

        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        else:
            ids = tok("".join(str(m.get("content", "")) for m in messages), return_tensors="pt").input_ids
        with self.lock, torch.no_grad():
            out = self.model.generate(ids, max_new_tokens=max_tokens, do_sample=False,
                                      pad_token_id=tok.pad_token_id or tok.eos_token_id)
        return str(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))


def handler(chat: ChatModel) -> type:
    class Handler(BaseHTTPRequestHandler):
        timeout = 60

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0") or 0)
            body = json.loads(self.rfile.read(min(length, 1 << 22)) or b"{}")
            if not self.path.endswith("/chat/completions") or not isinstance(body.get("messages"), list):
                return self._send(404, {"error": "POST /v1/chat/completions with messages"})
            text = chat.reply(body["messages"], int(body.get("max_tokens", 64)))
            self._send(200, {"object": "chat.completion", "model": body.get("model", ""),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": text}}]})

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rlvr.testing.chat_server")
    ap.add_argument("model")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", a.port), handler(ChatModel(a.model)))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
