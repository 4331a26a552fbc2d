# ruff: noqa: RUF001 (the Chinese report keeps its full-width punctuation)
"""Real-looking issue texts for the suggester tests (written for these tests, not taken from the samples)."""

LOOP_EN = """We run a support agent on the ReAct executor with three tools (search_docs, get_order, refund).
For one customer message the agent keeps calling search_docs with the same query and never answers.
It repeats the identical tool call until the run is stopped by the iteration cap.

```
[step 1] search_docs(query="refund policy for damaged items")
[step 2] search_docs(query="refund policy for damaged items")
[step 3] search_docs(query="refund policy for damaged items")
...
[step 25] search_docs(query="refund policy for damaged items")
AgentExecutor: stopped after max_iterations=25
```

The tool returns the same three documents every time, so nothing changes between steps.
Expected: the agent notices it already has the result and answers the customer.
"""

LOOP_ES = """Usamos un agente de soporte con el ejecutor ReAct y tres herramientas (search_docs, get_order, refund).
Para un mensaje de un cliente el agente sigue llamando a search_docs con la misma consulta y nunca responde.
Repite la misma llamada a la herramienta hasta que la ejecución se detiene por el límite de iteraciones.

```
[step 1] search_docs(query="refund policy for damaged items")
[step 2] search_docs(query="refund policy for damaged items")
[step 3] search_docs(query="refund policy for damaged items")
...
[step 25] search_docs(query="refund policy for damaged items")
AgentExecutor: stopped after max_iterations=25
```

La herramienta devuelve los mismos tres documentos cada vez, así que nada cambia entre pasos.
Esperado: el agente se da cuenta de que ya tiene el resultado y responde al cliente.
"""

RATE_EN = """Our research agent calls the web search API for every sub-question. With 8 parallel workers the
search provider starts returning HTTP 429 Too Many Requests and the whole run fails.

```
httpx.HTTPStatusError: Client error '429 Too Many Requests' for url 'https://api.search.example/v1/query'
Retry-After: 30
```

The agent does not wait or retry; the first 429 aborts the task and the partial results are lost.
"""

RATE_ES = """Nuestro agente de investigación llama a la API de búsqueda web para cada subpregunta. Con 8 workers en
paralelo el proveedor de búsqueda empieza a devolver HTTP 429 Too Many Requests y toda la ejecución falla.

```
httpx.HTTPStatusError: Client error '429 Too Many Requests' for url 'https://api.search.example/v1/query'
Retry-After: 30
```

El agente no espera ni reintenta; el primer 429 aborta la tarea y se pierden los resultados parciales.
"""

JSON_EN = """The planner model is asked to answer with JSON for the next tool call, but about one reply in five is
not valid JSON: it wraps the object in prose or leaves a trailing comma.

```
json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 4 column 1 (char 61)
raw output: Sure! Here is the call: {"tool": "create_ticket", "args": {"title": "VPN down",}}
```

The output parser raises and the run ends, although the model clearly meant a valid call.
"""

JSON_ES = """Se pide al modelo planificador que responda con JSON para la siguiente llamada a herramienta, pero
aproximadamente una respuesta de cada cinco no es JSON válido: envuelve el objeto en prosa o deja una coma final.

```
json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 4 column 1 (char 61)
raw output: Sure! Here is the call: {"tool": "create_ticket", "args": {"title": "VPN down",}}
```

El parser de salida lanza una excepción y la ejecución termina, aunque el modelo claramente quería una llamada válida.
"""

PAIRS = {
    "loop": ("Agent repeats the same search_docs call forever", LOOP_EN,
             "El agente repite la misma llamada a search_docs sin parar", LOOP_ES),
    "rate limit": ("Search API 429 aborts the whole research run", RATE_EN,
                   "Un 429 de la API de búsqueda aborta toda la investigación", RATE_ES),
    "malformed json": ("Planner output is often not valid JSON", JSON_EN,
                       "La salida del planificador a menudo no es JSON válido", JSON_ES),
}  # fmt: skip

# Real Chinese punctuation (full-width commas and question marks) is part of the test.
CHINESE = """我们的客服代理在处理退款请求时陷入了循环。它一直用相同的参数调用同一个工具，从不回答用户。
我们设置了最大迭代次数，但代理每次都运行到上限才停止，最后什么结果也没有返回给用户。
这个问题在升级到新版本以后出现，之前一切正常。请问这是已知问题吗？有没有办法让代理在重复调用时自己停下来？
"""

# Korean: a script the local model has no lexicon for (declined, never guessed).
KOREAN = """고객 지원 에이전트가 환불 요청을 처리하다가 같은 도구를 같은 인자로 계속 호출합니다.
사용자에게 답을 하지 않습니다. 최대 반복 횟수에 도달해야 멈추고, 결과는 아무것도 돌려주지 않습니다.
새 버전으로 올린 뒤부터 생긴 문제입니다.
"""

SHORT_LOOP = "Agent got stuck in a loop: it called the same tool with the same arguments 40 times until the cap."

TEMPLATED_SHORT_LOOP = """<!-- Please fill in the template. Issues without a reproduction may be closed. -->
### Checklist

- [ ] I have searched the existing issues
- [ ] I am using the latest version
- [x] I have read the contributing guide

### Feature Area

Core / agent runtime

### Describe the bug

Agent got stuck in a loop: it called the same tool with the same arguments 40 times until the cap.

### Steps to reproduce

**Steps:**

### Expected behavior

_No response_

### Environment

- OS: macOS 14.4
- Python version: 3.12.2
- Package version: 0.4.11
- VS Code version: Code - Insiders 1.89.0

### Additional context

_No response_
"""

# "exceeded" appears in many indicators (rate limits, context windows, budgets); here it is an iteration cap.
MAX_ITERATIONS = """Running the coding agent on a large refactor, it stops with "Agent stopped due to iteration limit
or time limit." The log shows max_iterations exceeded after 15 steps while it was still editing files one by
one, and every step had made progress. We did not set a limit ourselves; the default of 15 is too low for this.
"""
