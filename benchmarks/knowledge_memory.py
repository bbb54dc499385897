"""Memory while documents are indexed: a 200-page PDF in one process, and 20 MB uploads
through the API of a running server.

1. **A 200-page PDF** (generated: about 3,000 characters of the corpus's words a page,
   compressed page streams, like a report exported from a word processor), indexed in a
   child process on a fresh SQLite database through ``knowledge.services.document_add``
   (stored from a file on disk, as the server's upload handler leaves it; the text
   extracted by pypdf) and ``knowledge.indexing.index_document``. The process's resident
   memory (RSS) before, its peak during each step (``VmHWM``, reset before each step
   through ``/proc/self/clear_refs``) and after.
2. **20 MB uploads on a running server**: the embedded-mode server (daphne on SQLite, as
   ``tests.integration.stack.running_stack`` starts it, with ``DEBUG`` off as deployed;
   indexing runs in the server's runtime thread), an API token, a knowledge base. After
   a warm-up (a small Markdown file and a small PDF uploaded, indexed and searched), 20
   MB files are uploaded with ``POST /api/knowledge/{id}/documents`` (streamed from
   disk; as a multipart form, as ``curl -F`` sends, and as the raw body named in
   ``Content-Disposition``, as the site's pages send) one after another: Markdown, PDF
   (uncompressed pages), then each again (``--uploads`` rounds); after each the
   documents are listed until it is ``ready`` and the base is searched. The server's RSS
   is read from ``/proc/<pid>/status`` before, its peak during each upload and indexing
   (``VmHWM`` after a reset, and sampled every 20 ms), and after. The extraction keeps
   the first 2,000,000 characters of a file's text
   (``files.extraction.MAX_TEXT_CHARS``), so that is what each file's indexing handles.

    .venv/bin/python benchmarks/knowledge_memory.py [--pages 200] [--upload-mb 20]
        [--uploads 2] [--skip-pdf] [--skip-server] [--body multipart|raw|both]
        [--server-env NAME=VALUE ...] [--json FILE]

``--body both`` (the default) runs the uploads on two fresh servers, once each way:
Twisted, under daphne, parses a multipart POST body in memory before the application
sees it (see docs/performance.md), a raw body never.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from knowledge_common import (  # noqa: E402
    child_django,
    child_env,
    fresh_database,
    log,
    machine,
    reset_peak,
    rss_kb,
    run_child,
    scratch,
)

from tests.knowledge.corpus_build import Babbler, pdf_of_pages  # noqa: E402

SCRIPT = Path(__file__).resolve()
PAGE_CHARS = 3000
MB = 1_000_000


def mib(kb: int) -> float:
    return kb / 1024


class Sampler:
    """The highest RSS of a process, read every ``interval`` seconds in a thread (a check
    on VmHWM, and the figure when clear_refs is not allowed)."""

    def __init__(self, pid: int | str = "self", interval: float = 0.02) -> None:
        self.pid, self.interval = pid, interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, KeyError):
                self.peak = max(self.peak, rss_kb(self.pid)[0])
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self.peak = rss_kb(self.pid)[0]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def peak_of(pid: int | str = "self") -> Iterator[dict[str, Any]]:
    """The phase's figures: RSS before and after, its peak (VmHWM after a reset when
    allowed, else the sampled one) and the sampled peak."""
    gc.collect()
    figures: dict[str, Any] = {"before_kb": rss_kb(pid)[0]}
    figures["hwm_reset"] = reset_peak(pid)
    started = time.perf_counter()
    with Sampler(pid) as sampler:
        yield figures
    figures["seconds"] = time.perf_counter() - started
    now, hwm = rss_kb(pid)
    figures["after_kb"] = now
    figures["sampled_peak_kb"] = sampler.peak
    figures["peak_kb"] = hwm if figures["hwm_reset"] else sampler.peak


def big_pdf(pages: int, seed: int = 5) -> bytes:
    babbler = Babbler(seed=seed)
    return pdf_of_pages([babbler.paragraphs(PAGE_CHARS) for _ in range(pages)])


def big_markdown(size: int, seed: int) -> bytes:
    """About ``size`` bytes of Markdown in the corpus's words (headings, paragraphs)."""
    babbler = Babbler(seed=seed)
    block = babbler.paragraphs(400_000).encode()
    parts, total = [], 0
    while total < size:
        piece = block[: size - total]
        parts.append(piece)
        total += len(piece)
    return b"".join(parts)


def big_pdf_of_size(size: int, seed: int) -> bytes:
    """A PDF of about ``size`` bytes: pages of text in uncompressed streams, so that the
    file, not only its text, is large (compressed, 20 MB would take ~20,000 pages)."""
    babbler = Babbler(seed=seed)
    texts = [babbler.paragraphs(PAGE_CHARS) for _ in range(50)]
    one, two = (len(pdf_of_pages(texts[:n], compress=False)) for n in (1, 2))
    page = two - one
    return pdf_of_pages([texts[i % 50] for i in range(size // page)], compress=False)


# ----------------------------------------------------------------- 1. one process, a PDF


def child(pdf_path: str) -> None:
    child_django()
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile, UploadedFile

    from knowledge import indexing, retrieval, services
    from knowledge.models import Document

    user = get_user_model().objects.create_user(username="bench", password="bench-pw-123")
    base = services.base_create(user, "Memory")
    # Warm-up: the extraction, chunking and search paths once, on a 1-page PDF.
    small = services.document_add(base, SimpleUploadedFile("warm.pdf", big_pdf(1, seed=1)))
    indexing.index_document(small.pk)
    retrieval.search(user, [base.pk], "policy", k=5)

    path = Path(pdf_path)
    out: dict[str, Any] = {"bytes": path.stat().st_size}
    with path.open("rb") as handle:
        upload = UploadedFile(
            handle, name=path.name, content_type="application/pdf", size=out["bytes"]
        )
        with peak_of() as add:
            document = services.document_add(base, upload)
    with peak_of() as index:
        status = indexing.index_document(document.pk)
    assert status == Document.Status.READY, status
    document.refresh_from_db()
    out.update(add=add, index=index, pages=len(document.file.pages), chunks=document.chunk_count)
    del document, upload
    gc.collect()
    out["after_kb"] = rss_kb()[0]
    print(json.dumps(out))


def pdf_in_process(pages: int) -> dict[str, Any]:
    with scratch() as work:
        pdf = work / f"report-{pages}-pages.pdf"
        pdf.write_bytes(big_pdf(pages))
        with fresh_database("sqlite", work) as (url, _):
            return run_child(SCRIPT, [str(pdf)], child_env(work, url))


# ------------------------------------------------------------- 2. a server, 20 MB uploads

SETUP_TOKEN = """
import os
from pathlib import Path
from conversations.http.tokens import token_create
_alice = get_user_model().objects.get(username="alice")
Path(os.environ["AGENTSITE_VAR_DIR"], "bench_token").write_text(token_create(user=_alice)[1])
"""


def _wait_ready(api: httpx.Client, base_id: int, document_id: int, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for document in api.get(f"/api/knowledge/{base_id}/documents").json():
            if document["id"] == document_id and document["status"] in ("ready", "failed"):
                return document
        time.sleep(0.2)
    raise TimeoutError(f"document {document_id} not indexed within {timeout} s")


def raw_body(name: str) -> dict[str, str]:
    """The headers of a file sent as the request's body, as static/js/attach.js sends."""
    return {
        "Content-Type": "application/octet-stream",
        "Content-Disposition": f'attachment; filename="{name}"',
    }


def upload(
    api: httpx.Client, base_id: int, name: str, data: Any, kind: str, body: str
) -> httpx.Response:
    path = f"/api/knowledge/{base_id}/documents"
    if body == "raw":
        return api.post(path, content=data, headers=raw_body(name))
    return api.post(path, files={"file": (name, data, kind)})


def server_uploads(
    size_mb: int, rounds: int, body: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    from tests.integration.stack import running_stack

    out: dict[str, Any] = {"uploads": []}
    with scratch() as work:
        files = []
        for n in range(rounds):
            markdown = work / f"handbook-{n}.md"
            markdown.write_bytes(big_markdown(size_mb * MB, seed=100 + n))
            pdf = work / f"scan-{n}.pdf"
            pdf.write_bytes(big_pdf_of_size(size_mb * MB, seed=200 + n))
            files += [(markdown, "text/markdown"), (pdf, "application/pdf")]
        with running_stack(
            mode="embedded",
            setup_extra=SETUP_TOKEN,
            extra_env={"DEBUG": "false", **(env or {})},  # DEBUG keeps every query's SQL
        ) as stack:
            pid = stack.daphne.pid
            token = (stack.work / "var" / "bench_token").read_text().strip()
            api = httpx.Client(
                base_url=stack.base_url,
                headers={"Authorization": f"Bearer {token}"},
                timeout=600,
                trust_env=False,
            )
            out["started_kb"] = rss_kb(pid)[0]
            base_id = api.post("/api/knowledge", json={"name": "Uploads"}).json()["id"]
            for name, data, kind in (
                ("warm.md", big_markdown(30_000, seed=1), "text/markdown"),
                ("warm.pdf", big_pdf(2, seed=2), "application/pdf"),
            ):
                added = upload(api, base_id, name, data, kind, body)
                assert added.status_code == 201, added.text
                _wait_ready(api, base_id, added.json()["id"])
            api.get(f"/api/knowledge/{base_id}/search", params={"q": "on-call policy"})
            time.sleep(1)
            out["warm_kb"] = rss_kb(pid)[0]
            for path, kind in files:
                with peak_of(pid) as figures:
                    with path.open("rb") as handle:
                        started = time.perf_counter()
                        added = upload(api, base_id, path.name, handle, kind, body)
                        figures["upload_s"] = time.perf_counter() - started
                    assert added.status_code == 201, added.text[:500]
                    document = _wait_ready(api, base_id, added.json()["id"])
                    figures["indexed_s"] = time.perf_counter() - started
                    hits = api.get(
                        f"/api/knowledge/{base_id}/search", params={"q": "expenses receipt"}
                    )
                    assert hits.status_code == 200, hits.text[:500]
                    time.sleep(1)
                figures.update(
                    name=path.name,
                    bytes=path.stat().st_size,
                    status=document["status"],
                    chunks=document.get("chunk_count"),
                    error=document.get("error", ""),
                )
                out["uploads"].append(figures)
                log(
                    f"  {path.name} ({figures['bytes'] / MB:.1f} MB): {document['status']}, "
                    f"{figures.get('chunks')} chunks, upload {figures['upload_s']:.1f} s, "
                    f"indexed {figures['indexed_s']:.1f} s; server RSS "
                    f"{mib(figures['before_kb']):.0f} -> peak {mib(figures['peak_kb']):.0f} "
                    f"-> {mib(figures['after_kb']):.0f} MiB"
                )
            time.sleep(5)
            out["final_kb"] = rss_kb(pid)[0]
            api.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--upload-mb", type=int, default=20)
    parser.add_argument("--uploads", type=int, default=2, help="rounds of Markdown + PDF")
    parser.add_argument("--skip-pdf", action="store_true")
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument(
        "--body",
        choices=("multipart", "raw", "both"),
        default="both",
        help="how the files are sent: a multipart form, the raw body, or each on its server",
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the server (e.g. MALLOC_ARENA_MAX=2)",
    )
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", nargs=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0])
        return
    for line in machine():
        log(line)
    results: dict[str, Any] = {}
    if not args.skip_pdf:
        log(f"\n== a {args.pages}-page PDF, indexed in one process (SQLite)")
        pdf = results["pdf"] = pdf_in_process(args.pages)
        add, index = pdf["add"], pdf["index"]
        log(
            f"{pdf['bytes'] / MB:.2f} MB, {pdf['pages']} pages, {pdf['chunks']} chunks\n"
            f"| step | RSS before | peak | after | time |\n|---|---|---|---|---|\n"
            f"| document_add (store, extract) | {mib(add['before_kb']):.0f} MiB | "
            f"{mib(add['peak_kb']):.0f} MiB | {mib(add['after_kb']):.0f} MiB | "
            f"{add['seconds']:.2f} s |\n"
            f"| index_document (chunk, write) | {mib(index['before_kb']):.0f} MiB | "
            f"{mib(index['peak_kb']):.0f} MiB | {mib(index['after_kb']):.0f} MiB | "
            f"{index['seconds']:.2f} s |\n"
            f"(peaks: VmHWM after a reset: {add['hwm_reset']}; sampled every 20 ms: "
            f"{mib(add['sampled_peak_kb']):.0f} / {mib(index['sampled_peak_kb']):.0f} MiB)"
        )
    bodies = ("multipart", "raw") if args.body == "both" else (args.body,)
    for body in [] if args.skip_server else bodies:
        log(
            f"\n== {args.upload_mb} MB uploads through the API, embedded server (daphne, "
            f"SQLite), {body} bodies" + "".join(f", {item}" for item in args.server_env)
        )
        env = dict(item.split("=", 1) for item in args.server_env)
        server = results[f"server_{body}"] = server_uploads(args.upload_mb, args.uploads, body, env)
        log(
            f"server RSS: started {mib(server['started_kb']):.0f} MiB, after the warm-up "
            f"{mib(server['warm_kb']):.0f} MiB, 5 s after the last upload "
            f"{mib(server['final_kb']):.0f} MiB"
        )
        log("| upload | size | upload s | ready s | chunks | RSS before | peak | after |")
        log("|---|---|---|---|---|---|---|---|")
        for u in server["uploads"]:
            log(
                f"| {u['name']} | {u['bytes'] / MB:.1f} MB | {u['upload_s']:.1f} | "
                f"{u['indexed_s']:.1f} | {u['chunks']} | {mib(u['before_kb']):.0f} MiB | "
                f"{mib(u['peak_kb']):.0f} MiB | {mib(u['after_kb']):.0f} MiB |"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
