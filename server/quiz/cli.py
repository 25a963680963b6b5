"""``flask --app server quiz grade QUESTION_ID --answer TEXT [--seed N]``: one JSON object out
(``needs_review`` says whether the answer would wait for a teacher); ``flask quiz decisions
QUESTION_ID``: the teachers' review decisions as graded examples; ``flask quiz
annotation-decisions``: homework 2's annotation decisions as ``annotation_examples.json`` entries."""
from __future__ import annotations

import json

import click
from flask import Blueprint

from coursework.quiz.bank import BankError, load_question
from coursework.quiz.grading import grade
from server.quiz.views import bp


def register_cli(bp: Blueprint) -> None:
    """Attach the quiz commands to the blueprint's CLI group (``flask quiz ...``)."""

    @bp.cli.command("grade")
    @click.argument("question_id")
    @click.option("--answer", required=True, help="the answer exactly as a student would type it")
    @click.option("--seed", type=int, default=1, show_default=True, help="variant seed")
    @click.option("--lang", type=click.Choice(["zh", "en"]), default="en", show_default=True)
    def grade_command(question_id: str, answer: str, seed: int, lang: str) -> None:
        """Grade one answer without the browser and print score, max_score and feedback."""
        try:
            question = load_question(question_id)
        except BankError as err:
            raise click.ClickException(str(err)) from err
        result = grade(question, seed, answer)
        out = {"question": question_id, "seed": seed, "status": result.status.value, "score": result.score,
               "max_score": result.max_score, "needs_review": result.needs_review,
               "confidence": result.details.get("confidence"), "feedback": result.feedback_text(lang),
               "details": result.details}
        click.echo(json.dumps(out, ensure_ascii=False))

    @bp.cli.command("decisions")
    @click.argument("question_id")
    def decisions_command(question_id: str) -> None:
        """Print the teachers' review decisions on QUESTION_ID as examples.json entries (regression examples)."""
        from server.quiz.review import decisions_as_examples

        click.echo(json.dumps(decisions_as_examples(question_id), ensure_ascii=False, indent=2))

    @bp.cli.command("annotation-decisions")
    def annotation_decisions_command() -> None:
        """Print the teachers' decisions on homework annotations as annotation_examples.json entries."""
        from server.dashboard.review_annotation import decisions_as_examples

        click.echo(json.dumps(decisions_as_examples(), ensure_ascii=False, indent=2))


register_cli(bp)  # ``server.ROUTES`` imports this module after the quiz pages
