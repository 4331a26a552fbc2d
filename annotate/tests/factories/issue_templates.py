# ruff: noqa: E501 (issue forms and pasted logs keep their long lines, as GitHub renders them)
"""Reports filed through the bug-report forms of six real projects, as GitHub renders a filled-in form.

The scaffolding follows each project's .github/ISSUE_TEMPLATE form (section labels, checkboxes,
dropdown values, the form's placeholder sentences a reporter leaves in); the reports themselves were
written for these tests. Each entry is (project, title, plain, templated): `plain` is only what the
reporter wrote (prose, steps, logs), `templated` is the same words inside the project's form.
"""

# langchain-ai/langchain: bug-report.yml (System Info, Who can help?, Information, Related Components,
# Reproduction, Expected behavior).
LANGCHAIN_PLAIN = """The agent executor fails on every second question because the model answers with a tool call
whose arguments are not valid JSON, and the output parser raises instead of asking the model again.

```
langchain_core.exceptions.OutputParserException: Could not parse tool input: {'query': 'weather in Paris'
```

I expected the executor to send the parsing error back to the model and retry, as handle_parsing_errors=True says.
"""

LANGCHAIN_TEMPLATED = """### System Info

System Information
------------------
> OS:  Linux
> OS Version:  #1 SMP PREEMPT_DYNAMIC Debian 6.1.90-1
> Python Version:  3.11.9 (main, Apr  2 2024, 08:25:04) [GCC 12.2.0]

Package Information
-------------------
> langchain_core: 0.2.10
> langchain: 0.2.6
> langsmith: 0.1.82
> langchain_openai: 0.1.13

### Who can help?

@hwchase17 @agola11

### Information

- [ ] The official example notebooks/scripts
- [X] My own modified scripts

### Related Components

- [X] LLMs/Chat Models
- [ ] Embedding Models
- [X] Output Parsers
- [X] Agents / Agent Executors
- [ ] Tools / Toolkits

### Reproduction

The agent executor fails on every second question because the model answers with a tool call
whose arguments are not valid JSON, and the output parser raises instead of asking the model again.

```
langchain_core.exceptions.OutputParserException: Could not parse tool input: {'query': 'weather in Paris'
```

### Expected behavior

I expected the executor to send the parsing error back to the model and retry, as handle_parsing_errors=True says.
"""

# All-Hands-AI/OpenHands: bug_template.yml (existing-issue checkbox, description, installation, version,
# model name, operating system, logs).
OPENHANDS_PLAIN = """I asked the agent to clean up the build folder of my project. It ran rm -rf on the parent
directory instead and deleted my other repositories in the workspace mount, without asking me first.

Steps: start the app with a workspace mounted, ask for "remove the build artifacts", watch the terminal.

```
$ rm -rf /workspace/..
```
"""

OPENHANDS_TEMPLATED = """### Is there an existing issue for the same bug? (If one exists, thumbs up or comment on the issue instead).

- [X] I have checked the existing issues.

### Describe the bug and reproduction steps

I asked the agent to clean up the build folder of my project. It ran rm -rf on the parent
directory instead and deleted my other repositories in the workspace mount, without asking me first.

Steps: start the app with a workspace mounted, ask for "remove the build artifacts", watch the terminal.

### OpenHands Installation

Docker command in README

### OpenHands Version

0.9.8

### Model Name

claude-3-5-sonnet-20241022

### Operating System

WSL on Windows

### Logs, Errors, Screenshots, and Additional Context

```
$ rm -rf /workspace/..
```
"""

# crewAIInc/crewAI: bug_report.yml (Description, Steps to Reproduce, Expected behavior, Screenshots/Code
# snippets, Operating System, Python Version, crewAI Version, crewAI Tools Version, Virtual Environment,
# Evidence, Possible Solution, Additional context).
CREWAI_PLAIN = """The manager agent delegates the research task to a coworker called "Data Analyst", but no agent
with that role exists in the crew. The delegation tool returns an error and the manager keeps inventing new
coworker names instead of using the two agents it was given.

1. Create a hierarchical crew with a Researcher and a Writer.
2. Kick off the crew with a research task.
3. Watch the manager delegate to agents that are not in the crew.

The manager should only delegate to the Researcher or the Writer.

```
Error executing tool. coworker mentioned not found, it must be one of the following options:
- researcher
- writer
```
"""

CREWAI_TEMPLATED = """### Description

The manager agent delegates the research task to a coworker called "Data Analyst", but no agent
with that role exists in the crew. The delegation tool returns an error and the manager keeps inventing new
coworker names instead of using the two agents it was given.

### Steps to Reproduce

1. Create a hierarchical crew with a Researcher and a Writer.
2. Kick off the crew with a research task.
3. Watch the manager delegate to agents that are not in the crew.

### Expected behavior

The manager should only delegate to the Researcher or the Writer.

### Screenshots/Code snippets

_No response_

### Operating System

Ubuntu 22.04

### Python Version

3.11

### crewAI Version

0.28.8

### crewAI Tools Version

0.1.6

### Virtual Environment

Venv

### Evidence

```
Error executing tool. coworker mentioned not found, it must be one of the following options:
- researcher
- writer
```

### Possible Solution

None

### Additional context

_No response_
"""

# microsoft/autogen: 1-bug_report.yml ("What happened?" pre-filled with bold labels and placeholder
# sentences the reporter partly leaves in; packages, versions, model, provider, Python, OS dropdowns).
AUTOGEN_PLAIN = """The assistant agent ends the group chat with TERMINATE and says all tests pass, but the test
run it just executed failed with two errors. Nobody checks the claim before the chat stops.

```
FAILED tests/test_api.py::test_create_user - AssertionError: 500 != 201
```

The agent should read the test output before it claims the task is finished.
"""

AUTOGEN_TEMPLATED = """### What happened?

**Describe the bug**
The assistant agent ends the group chat with TERMINATE and says all tests pass, but the test
run it just executed failed with two errors. Nobody checks the claim before the chat stops.

**To Reproduce**
Steps to reproduce the behavior. Please include code and outputs such as stacktrace.

```
FAILED tests/test_api.py::test_create_user - AssertionError: 500 != 201
```

**Expected behavior**
The agent should read the test output before it claims the task is finished.

**Screenshots**
If applicable, add screenshots to help explain your problem.

**Additional context**
Add any other context about the problem here.

### Which packages was the bug in?

Python AgentChat (autogen-agentchat>=0.4.0)

### AutoGen library version.

Python 0.4.7

### Other library version.

_No response_

### Model used

gpt-4o-2024-11-20

### Model provider

Azure OpenAI

### Other model provider

_No response_

### Python version

3.12

### .NET version

None

### Operating system

Ubuntu
"""

# run-llama/llama_index: issue-form.yml (Bug Description, Version, Steps to Reproduce, Relevant
# Logs/Tracbacks rendered as a shell block).
LLAMAINDEX_PLAIN = """After about twenty turns the chat engine stops answering: the memory buffer keeps every message
and the prompt grows past the model's context window. The oldest messages are never summarised or dropped.

Create a ReAct agent with ChatMemoryBuffer and keep chatting in one session for a while.

```shell
openai.BadRequestError: Error code: 400 - This model's maximum context length is 16385 tokens. However, your messages resulted in 17012 tokens.
```
"""

LLAMAINDEX_TEMPLATED = """### Bug Description

After about twenty turns the chat engine stops answering: the memory buffer keeps every message
and the prompt grows past the model's context window. The oldest messages are never summarised or dropped.

### Version

0.10.12

### Steps to Reproduce

Create a ReAct agent with ChatMemoryBuffer and keep chatting in one session for a while.

### Relevant Logs/Tracbacks

```shell
openai.BadRequestError: Error code: 400 - This model's maximum context length is 16385 tokens. However, your messages resulted in 17012 tokens.
```
"""

# Significant-Gravitas/AutoGPT: 1.bug.yml (existing-issue checkbox, OS, version, LLM provider, area,
# commit, "Describe your issue.", activity and error log uploads).
AUTOGPT_PLAIN = """The agent stops the whole run on the first 429 from the model provider. It does not wait for the
Retry-After time or retry the request, so a long task is lost after a few minutes.

```
openai.RateLimitError: Error code: 429 - Rate limit reached for requests. Please try again in 20s.
```
"""

AUTOGPT_TEMPLATED = """### ⚠️ Search for existing issues first ⚠️

- [X] I have searched the existing issues, and there is no existing issue for my problem

### Which Operating System are you using?

Docker

### Which version of AutoGPT are you using?

Latest Release

### What LLM Provider do you use?

Azure

### Which area covers your issue best?

Agents

### What commit or version are you using?

3f6e2a1c9b7d4e5f8a0b1c2d3e4f5a6b7c8d9e0f

### Describe your issue.

The agent stops the whole run on the first 429 from the model provider. It does not wait for the
Retry-After time or retry the request, so a long task is lost after a few minutes.

### Upload Activity Log Content

_No response_

### Upload Error Log Content

```
openai.RateLimitError: Error code: 429 - Rate limit reached for requests. Please try again in 20s.
```
"""

TEMPLATED_REPORTS = [
    ("langchain-ai/langchain", "Executor raises on malformed tool input", LANGCHAIN_PLAIN, LANGCHAIN_TEMPLATED),
    ("All-Hands-AI/OpenHands", "[Bug]: agent deleted my other repositories", OPENHANDS_PLAIN, OPENHANDS_TEMPLATED),
    ("crewAIInc/crewAI", "[BUG] manager delegates to coworkers that do not exist", CREWAI_PLAIN, CREWAI_TEMPLATED),
    ("microsoft/autogen", "Agent claims tests pass and terminates", AUTOGEN_PLAIN, AUTOGEN_TEMPLATED),
    (
        "run-llama/llama_index",
        "[Bug]: chat memory overflows the context window",
        LLAMAINDEX_PLAIN,
        LLAMAINDEX_TEMPLATED,
    ),
    ("Significant-Gravitas/AutoGPT", "Run aborted on first rate limit error", AUTOGPT_PLAIN, AUTOGPT_TEMPLATED),
]

# Lines that belong to the forms, never to a report: none may be read as report text or quoted.
SCAFFOLDING = [
    "System Information", "OS Version", "Python Version", "langchain_core: 0.2.10", "Who can help", "@hwchase17",
    "My own modified scripts", "Output Parsers", "Related Components", "existing issues", "Docker command in README",
    "0.9.8", "claude-3-5-sonnet", "WSL on Windows", "Logs, Errors", "Ubuntu 22.04", "crewAI Version", "Venv",
    "No response", "Possible Solution", "Describe the bug", "To Reproduce", "Steps to reproduce the behavior",
    "If applicable, add screenshots", "Add any other context", "autogen-agentchat", "Python 0.4.7", "Azure OpenAI",
    "gpt-4o-2024-11-20", "0.10.12", "Latest Release", "Which area", "3f6e2a1c9b7d", "Upload Activity Log",
    "Search for existing issues", "###", "- [",
]  # fmt: skip
