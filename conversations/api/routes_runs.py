"""Runs and messages: stop, retry, continue, regenerate, approve; edit, switch, pin."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Status

from audit.services import client_of
from conversations import selectors, services
from conversations.api.docs import errors
from conversations.api.lookups import model_for
from conversations.api.outputs import conversation_detail_out, events_url, message_out, run_out
from conversations.api.params import CallId, MessageId, RunId
from conversations.api.schemas import (
    ApprovalDecided,
    ApprovalDecision,
    ConversationDetail,
    MessageOut,
    QuestionEdit,
    QuestionEdited,
    RegenerateChoiceBody,
    ResumeNoteBody,
    RunOut,
)
from conversations.branches import branching, resuming

router = Router(tags=["runs"])


@router.post(
    "/runs/{id:run_id}/cancel",
    response={202: RunOut, **errors(404)},
    operation_id="cancelRun",
    summary="Stop a run (ends its LLM request and tools at the next step)",
    url_name="api_run_cancel",
)
def run_cancel(request: HttpRequest, run_id: RunId):
    run = services.run_cancel(run=selectors.run_get(user=request.user, run_id=run_id))
    return Status(202, run_out(run))


@router.post(
    "/runs/{id:run_id}/retry",
    response={202: RunOut, **errors(400, 404, 409)},
    operation_id="retryRun",
    summary="Answer a failed, stopped or incomplete run's question again",
    description="The new run is an alternative beside the old one (see `regenerate`), "
    "returned, and streams on the conversation's events.",
    url_name="api_run_retry",
)
def run_retry(request: HttpRequest, run_id: RunId):
    run = selectors.run_get(user=request.user, run_id=run_id)
    return Status(202, run_out(branching.run_retry(run=run, user=request.user)))


@router.post(
    "/runs/{id:run_id}/resume",
    response={202: RunOut, **errors(400, 404, 409, 413)},
    operation_id="resumeRun",
    summary="Continue a paused run from where it stopped, with an optional note",
    description="A run a loop guard paused (`status: paused`: the same tool error again and "
    "again, or turns without progress) goes on as a new run, its continuation "
    "(`parent_run_id` is the paused run): the model sees the paused run's tool calls and "
    "results as they were, then `content` (saved as a user message first) or, without one, "
    "a short request to continue. The new run's first event is `resume`. 409 when the run "
    "is not paused, cannot be resumed (paused in plan mode, which keeps no trace) or a run "
    "of the conversation is active; 400 for a note over the message limit.",
    url_name="api_run_resume",
)
def run_resume(request: HttpRequest, run_id: RunId, payload: ResumeNoteBody):
    run = selectors.run_get(user=request.user, run_id=run_id)
    resumed = resuming.run_resume(run=run, user=request.user, content=payload.content)
    return Status(202, run_out(resumed))


@router.post(
    "/runs/{id:run_id}/regenerate",
    response={202: RunOut, **errors(400, 404, 409)},
    operation_id="regenerateRun",
    summary="A new answer to the run's question, beside it",
    description="From the same history, optionally by another model you may use. The new "
    "run becomes the selected branch. 409 while a run of the conversation is active.",
    url_name="api_run_regenerate",
)
def run_regenerate(request: HttpRequest, run_id: RunId, payload: RegenerateChoiceBody):
    run = selectors.run_get(user=request.user, run_id=run_id)
    model_id = model_for(request.user, payload.model).pk if payload.model else None
    regenerated = branching.run_regenerate(run=run, user=request.user, model_id=model_id)
    return Status(202, run_out(regenerated))


@router.post(
    "/runs/{id:run_id}/select",
    response={200: ConversationDetail, **errors(404, 409)},
    operation_id="selectRun",
    summary="Switch to this answer among its alternatives",
    description="Below it, the branch last selected there is shown again. 409 while a run "
    "of the conversation is active.",
    url_name="api_run_select",
)
def run_select(request: HttpRequest, run_id: RunId):
    run = selectors.run_get(user=request.user, run_id=run_id)
    branching.branch_select_run(run=run)
    return conversation_detail_out(run.conversation)


@router.post(
    "/runs/{id:run_id}/approvals/{call_id}",
    response={200: ApprovalDecided, **errors(400, 404, 409)},
    operation_id="decideApproval",
    summary="Approve or deny a tool call waiting for your approval",
    description="The run resumes with the tool's result (approved) or with the refusal as "
    "the call's observation (denied).",
    url_name="api_run_approval",
)
def run_approval(request: HttpRequest, run_id: RunId, call_id: CallId, payload: ApprovalDecision):
    run = selectors.run_get(user=request.user, run_id=run_id)
    approval = services.approval_decide(
        run=run,
        call_id=call_id,
        user=request.user,
        approve=payload.approve,
        client=client_of(request),
    )
    return {"call_id": approval.call_id, "status": approval.status}


@router.post(
    "/messages/{id:message_id}/edit",
    response={202: QuestionEdited, **errors(400, 404, 409, 413)},
    operation_id="editMessage",
    summary="Ask a question again as edited, as a new branch",
    description="The edited text is a new message beside the original (which stays, with "
    "its answers); a new run answers it from the history before it. 409 while a run of the "
    "conversation is active.",
    url_name="api_message_edit",
)
def message_edit(request: HttpRequest, message_id: MessageId, payload: QuestionEdit):
    message = selectors.message_get(user=request.user, message_id=message_id)
    edited, run = branching.message_edit(
        message=message, user=request.user, content=payload.content
    )
    return Status(
        202,
        {
            "message_id": edited.pk,
            "run_id": run.pk,
            "run_status": run.status,
            "events_url": events_url(message.conversation_id),
        },
    )


@router.post(
    "/messages/{id:message_id}/select",
    response={200: ConversationDetail, **errors(400, 404, 409)},
    operation_id="selectMessage",
    summary="Switch to this version of a question among its edits",
    description="With the answer last selected for it. 409 while a run of the conversation "
    "is active.",
    url_name="api_message_select",
)
def message_select(request: HttpRequest, message_id: MessageId):
    message = selectors.message_get(user=request.user, message_id=message_id)
    branching.branch_select_question(message=message)
    return conversation_detail_out(message.conversation)


@router.post(
    "/messages/{id:message_id}/pin",
    response={200: MessageOut, **errors(404)},
    operation_id="pinMessage",
    summary="Pin a message (kept verbatim when older context is summarised)",
    url_name="api_message_pin",
)
def message_pin(request: HttpRequest, message_id: MessageId):
    message = selectors.message_get(user=request.user, message_id=message_id)
    return message_out(services.message_set_pinned(message=message, pinned=True))


@router.post(
    "/messages/{id:message_id}/unpin",
    response={200: MessageOut, **errors(404)},
    operation_id="unpinMessage",
    summary="Unpin a message",
    url_name="api_message_unpin",
)
def message_unpin(request: HttpRequest, message_id: MessageId):
    message = selectors.message_get(user=request.user, message_id=message_id)
    return message_out(services.message_set_pinned(message=message, pinned=False))
