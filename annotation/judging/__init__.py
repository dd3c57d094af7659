"""LLM judges (ORCA paper, section 5.6 and Appendix B.2): prompt templates, reply parsing and judge clients.

Nothing here touches the database; the service that runs judges over benchmarks is
``annotation.services.judging``.

* ``prompts/<variant>.txt``: the editable prompt templates (placeholders ``{question}``, ``{reference_answer}``,
  ``{candidate_answer}``, ``{rationale}``, ``{transcript}``), rendered by :mod:`annotation.judging.prompting`;
* :mod:`annotation.judging.parsing`: the score in a judge's reply ("Score: N", "Rating: N", JSON) and the
  expected score Σ p(k)·k from token log-probabilities;
* :mod:`annotation.judging.clients`: Gemini, OpenAI-compatible and local transformers judges behind one
  ``JudgeClient.judge(prompt=...) -> JudgeReply`` interface.
"""
