"""Upload-time format check for homework 2, named in ``assignment.json`` (``upload.validator``).

Runs inside ``Assignment.validate_upload``, before anything is stored: a file that cannot
be read at all (binary, bad YAML / JSON syntax, a broken notebook) is rejected with a clear
format error and costs no attempt. A file that *is* readable but is not a config is left to
the grader, which reports ``config.parse`` as failed.
"""
from __future__ import annotations

import json
import os

from coursework.config_annotation.parse import ConfigSyntaxError, parse
from coursework.exceptions import SubmissionRejected


def _text(data: bytes) -> str:
    if b"\x00" in data:
        raise SubmissionRejected("文件是二进制的，不是文本。", "The file is binary, not text.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SubmissionRejected("文件不是 UTF-8 文本。", "The file is not UTF-8 text.") from None


def check_notebook(source: str) -> dict:
    """The notebook as a dict, or SubmissionRejected if it is not a valid Jupyter notebook."""
    import nbformat
    try:
        nb = nbformat.reads(source, as_version=4)
        nbformat.validate(nb)
    except (json.JSONDecodeError, nbformat.ValidationError, nbformat.reader.NotJSONError, KeyError,
            AttributeError, TypeError) as e:
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise SubmissionRejected(f"这不是有效的 Jupyter notebook（{reason}）。请上传从网站下载、用 Jupyter 保存的 .ipynb 文件。",
                                 f"This is not a valid Jupyter notebook ({reason}). Upload the .ipynb you downloaded "
                                 "from the course site, saved by Jupyter.") from None
    return nb


def check_upload(filename: str, data: bytes) -> None:
    """Raise SubmissionRejected if the upload cannot be read as a config or a notebook."""
    source = _text(data)
    if os.path.splitext(filename)[1].lower() == ".ipynb":
        check_notebook(source)
        return
    try:
        parse(source, filename)
    except ConfigSyntaxError as e:
        where_zh = f"第 {e.line} 行" if e.line else ""
        where_en = f" at line {e.line}" if e.line else ""
        kind = "JSON" if filename.lower().endswith(".json") else "YAML"
        raise SubmissionRejected(f"{kind} 格式错误{where_zh}：{e}。没有保存，也不计次数。",
                                 f"{kind} syntax error{where_en}: {e}. Nothing was stored and no attempt was used.") from None
