//! Held calls as tasks, the protocol-neutral half (`Gateway::task_for_reply`,
//! `task_for_call`, `task`, `tasks`, `cancel_task`): a task waits while its hold does, runs
//! the approved call once whoever asks, ends with the refusal when the hold is denied or
//! expires, is withdrawn by its cancel, and belongs to the key that made the call; a call
//! that was not held is a task finished at birth. On SQLite and PostgreSQL.

use chrono::Utc;
use futures::TryStreamExt;
use rust_decimal::Decimal;
use skillgate_core::audit::{AuditEvent, EventKind};
use skillgate_core::gateway::{AgentIdentity, CallTask, Cancelled};
use skillgate_core::holds::Decider;
use skillgate_core::store::tasks::TaskStatus;

use crate::desk::{Fixture, agent, desk_session, fixture, held, reply, slug};

async fn events(f: &Fixture) -> Vec<AuditEvent> {
    f.audit.events(None).try_collect().await.unwrap()
}

fn count(events: &[AuditEvent], kind: EventKind) -> usize {
    events.iter().filter(|e| e.kind == kind).count()
}

/// A session with a refund of `amount` held, offered as a task.
async fn task_of_held_call(f: &Fixture, amount: u32) -> (String, CallTask) {
    let sid = desk_session(f).await;
    let reply = held(f, &sid, amount).await;
    let task = f
        .gateway
        .task_for_reply(&agent(), &reply)
        .await
        .unwrap()
        .expect("a held call is offered as a task");
    (sid, task)
}

/// A refund under 200 in a new session: it needs no approval, so it runs (into the
/// missing upstream); the gateway's reply.
async fn refund_that_runs(f: &Fixture) -> skillgate_core::gateway::ToolReply {
    let sid = desk_session(f).await;
    f.gateway
        .call(
            &agent(),
            Some(sid),
            "process_refund",
            crate::desk::refund(50),
        )
        .await
        .unwrap()
}

fn hold_of(task: &CallTask) -> &str {
    task.hold_id
        .as_deref()
        .expect("a held call's task names its hold")
}

async fn approve(f: &Fixture, task: &CallTask) {
    f.holds
        .approve(
            &Decider::console("rita"),
            hold_of(task),
            "checked",
            Utc::now(),
        )
        .await
        .unwrap();
}

async fn get(f: &Fixture, id: &str) -> CallTask {
    f.gateway
        .task(&agent(), id)
        .await
        .unwrap()
        .expect("the caller's task")
}

fn code(task: &CallTask) -> String {
    let result = task.result.as_ref().expect("a completed task has a result");
    result.structured_content.as_ref().unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_held_call_becomes_a_working_task_that_names_its_hold_and_what_the_reviewer_sees() {
    let f = fixture().await;
    let (_, task) = task_of_held_call(&f, 300).await;
    assert_eq!(task.status, TaskStatus::Working);
    assert!(
        task.id.starts_with("task_") && task.id.len() == 37,
        "{}",
        task.id
    );
    assert!(task.message.contains(hold_of(&task)), "{}", task.message);
    assert!(
        task.message.contains("waits for a reviewer"),
        "{}",
        task.message
    );
    assert!(task.result.is_none());
    // Long enough to wait, be approved and wait again (15 minutes each), then be read.
    assert_eq!(task.ttl_ms(), (15 + 15 + 60) * 60 * 1000);
    let again = get(&f, &task.id).await;
    assert_eq!(again.status, TaskStatus::Working);
}

#[tokio::test]
async fn only_a_pending_hold_is_offered_as_a_task() {
    let f = fixture().await;
    let ran = refund_that_runs(&f).await;
    assert!(
        f.gateway
            .task_for_reply(&agent(), &ran)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_approved_task_runs_its_call_once_and_every_later_poll_reads_the_same_result() {
    let f = fixture().await;
    let (_, task) = task_of_held_call(&f, 300).await;
    approve(&f, &task).await;
    let done = get(&f, &task.id).await;
    assert_eq!(done.status, TaskStatus::Completed, "{}", done.message);
    // No upstream is connected: the call ran into an upstream error, after its
    // `call_allowed`; what the agent would have read is the task's result.
    assert_eq!(code(&done), "UPSTREAM_ERROR");
    let hold = f.store.hold(hold_of(&task)).await.unwrap().unwrap();
    assert_eq!(hold.state.as_str(), "executed");
    let again = get(&f, &task.id).await;
    assert_eq!(again.result, done.result);
    assert_eq!(
        count(&events(&f).await, EventKind::CallAllowed),
        1,
        "ran once"
    );
}

#[tokio::test]
async fn an_agent_that_resumes_the_hold_itself_completes_its_task_with_that_result() {
    let f = fixture().await;
    let (sid, task) = task_of_held_call(&f, 300).await;
    approve(&f, &task).await;
    let (text, _) = reply(
        f.gateway
            .resume(&agent(), Some(sid), hold_of(&task), None, None, false)
            .await
            .unwrap(),
    );
    assert!(text.starts_with("UPSTREAM ERROR"), "it ran: {text}");
    let done = get(&f, &task.id).await;
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(code(&done), "UPSTREAM_ERROR");
    assert_eq!(
        count(&events(&f).await, EventKind::CallAllowed),
        1,
        "ran once"
    );
}

#[tokio::test]
async fn a_denied_or_expired_hold_completes_its_task_with_the_structured_refusal() {
    let f = fixture().await;
    let (_, denied) = task_of_held_call(&f, 300).await;
    f.holds
        .deny(
            &Decider::console("rita"),
            hold_of(&denied),
            "not this customer",
            Utc::now(),
        )
        .await
        .unwrap();
    let ended = get(&f, &denied.id).await;
    assert_eq!(ended.status, TaskStatus::Completed);
    assert_eq!(ended.result.as_ref().unwrap().is_error, Some(true));
    assert_eq!(code(&ended), "APPROVAL_DENIED");
    assert!(
        ended.message.contains("not this customer"),
        "{}",
        ended.message
    );

    let (_, expiring) = task_of_held_call(&f, 300).await;
    sqlx::query("UPDATE holds SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE id = $1")
        .bind(hold_of(&expiring))
        .execute(f.store.test_pool())
        .await
        .unwrap();
    let ended = get(&f, &expiring.id).await;
    assert_eq!(ended.status, TaskStatus::Completed);
    assert_eq!(code(&ended), "HOLD_EXPIRED");
    assert_eq!(
        count(&events(&f).await, EventKind::CallAllowed),
        0,
        "nothing ran"
    );
}

#[tokio::test]
async fn cancelling_a_task_withdraws_its_hold_releases_its_usage_and_is_audited_once() {
    let f = fixture().await;
    let (sid, task) = task_of_held_call(&f, 300).await;
    let reserved = f.store.load_session(&sid).await.unwrap().unwrap();
    assert_eq!(
        reserved.view.usage.sum("process_refund", "amount"),
        Decimal::from(300)
    );

    let Cancelled::Now(cancelled) = f.gateway.cancel_task(&agent(), &task.id).await.unwrap() else {
        panic!("a working task is cancelled")
    };
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    let hold = f.store.hold(hold_of(&task)).await.unwrap().unwrap();
    assert_eq!(hold.state.as_str(), "withdrawn");
    let released = f.store.load_session(&sid).await.unwrap().unwrap();
    assert_eq!(
        released.view.usage.sum("process_refund", "amount"),
        Decimal::ZERO
    );
    let log = events(&f).await;
    let withdrawn: Vec<_> = log
        .iter()
        .filter(|e| e.kind == EventKind::HoldWithdrawn)
        .collect();
    assert_eq!(withdrawn.len(), 1);
    assert_eq!(withdrawn[0].payload["hold_id"], hold_of(&task));
    assert_eq!(withdrawn[0].actor.as_deref(), Some("key-1"));
    assert_eq!(withdrawn[0].session_id.as_deref(), Some(sid.as_str()));

    // Cancelling again changes nothing; the task stays cancelled, and an approval of the
    // withdrawn hold is refused.
    assert!(matches!(
        f.gateway.cancel_task(&agent(), &task.id).await.unwrap(),
        Cancelled::AlreadyFinished(t) if t.status == TaskStatus::Cancelled
    ));
    assert_eq!(count(&events(&f).await, EventKind::HoldWithdrawn), 1);
    assert!(
        f.holds
            .approve(
                &Decider::console("rita"),
                hold_of(&task),
                "late",
                Utc::now()
            )
            .await
            .is_err()
    );
    assert_eq!(get(&f, &task.id).await.status, TaskStatus::Cancelled);
}

#[tokio::test]
async fn a_cancel_after_the_call_ran_leaves_the_task_completed() {
    let f = fixture().await;
    let (_, task) = task_of_held_call(&f, 300).await;
    approve(&f, &task).await;
    get(&f, &task.id).await;
    let Cancelled::AlreadyFinished(done) = f.gateway.cancel_task(&agent(), &task.id).await.unwrap()
    else {
        panic!("a finished task is not cancelled")
    };
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(count(&events(&f).await, EventKind::HoldWithdrawn), 0);
}

#[tokio::test]
async fn another_key_finds_no_task_by_that_id_and_cannot_cancel_it() {
    let f = fixture().await;
    let (_, task) = task_of_held_call(&f, 300).await;
    let other = other_key();
    assert!(f.gateway.task(&other, &task.id).await.unwrap().is_none());
    assert_eq!(
        f.gateway.cancel_task(&other, &task.id).await.unwrap(),
        Cancelled::NotFound
    );
    for unknown in ["task_00000000000000000000000000000000", "", "' OR 1=1 --"] {
        assert!(f.gateway.task(&agent(), unknown).await.unwrap().is_none());
    }
    assert_eq!(get(&f, &task.id).await.status, TaskStatus::Working);
    let hold = f.store.hold(hold_of(&task)).await.unwrap().unwrap();
    assert_eq!(hold.state.as_str(), "pending", "nothing changed");
}

#[tokio::test]
async fn a_task_past_its_lifetime_is_not_found_and_the_sweep_removes_it() {
    let f = fixture().await;
    let (_, ended) = task_of_held_call(&f, 300).await;
    let (_, live) = task_of_held_call(&f, 300).await;
    sqlx::query("UPDATE call_tasks SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE id = $1")
        .bind(&ended.id)
        .execute(f.store.test_pool())
        .await
        .unwrap();
    assert!(f.gateway.task(&agent(), &ended.id).await.unwrap().is_none());
    assert_eq!(f.holds.prune_tasks(Utc::now()).await.unwrap(), 1);
    assert_eq!(get(&f, &live.id).await.status, TaskStatus::Working);
}

fn other_key() -> AgentIdentity {
    AgentIdentity {
        key_id: 2,
        key_name: "key-2".to_owned(),
        scope: slug("desk"),
        connection: None,
    }
}

#[tokio::test]
async fn a_call_that_was_not_held_becomes_a_task_finished_with_what_the_call_answered() {
    let f = fixture().await;
    let ran = refund_that_runs(&f).await;
    let answered = ran.clone().into_call_result();
    let task = f.gateway.task_for_call(&agent(), ran).await.unwrap();
    assert_eq!(task.status, TaskStatus::Completed);
    assert_eq!(task.hold_id, None);
    assert_eq!(task.result.as_ref(), Some(&answered));
    assert_eq!(code(&task), "UPSTREAM_ERROR");
    // Kept for an hour to be read, by its own key only.
    assert_eq!(task.ttl_ms(), 60 * 60 * 1000);
    let read = get(&f, &task.id).await;
    assert_eq!((read.status, read.result), (task.status, task.result));
    assert!(
        f.gateway
            .task(&other_key(), &task.id)
            .await
            .unwrap()
            .is_none()
    );
    let Cancelled::AlreadyFinished(_) = f.gateway.cancel_task(&agent(), &task.id).await.unwrap()
    else {
        panic!("a finished task is not cancelled")
    };
}

#[tokio::test]
async fn a_held_call_asked_for_as_a_task_is_the_task_of_its_hold() {
    let f = fixture().await;
    let sid = desk_session(&f).await;
    let reply = held(&f, &sid, 300).await;
    let task = f.gateway.task_for_call(&agent(), reply).await.unwrap();
    assert_eq!(task.status, TaskStatus::Working);
    approve(&f, &task).await;
    assert_eq!(code(&get(&f, &task.id).await), "UPSTREAM_ERROR");
}

#[tokio::test]
async fn tasks_are_listed_to_their_own_key_in_pages_in_the_order_they_were_made() {
    let f = fixture().await;
    let (_, first) = task_of_held_call(&f, 300).await;
    let mut made = vec![first.id.clone()];
    let sid = desk_session(&f).await;
    for _ in 0..skillgate_core::gateway::TASK_PAGE {
        let reply = f
            .gateway
            .call(
                &agent(),
                Some(sid.clone()),
                "process_refund",
                crate::desk::refund(10),
            )
            .await
            .unwrap();
        made.push(f.gateway.task_for_call(&agent(), reply).await.unwrap().id);
    }
    let page = f.gateway.tasks(&agent(), None).await.unwrap().unwrap();
    assert_eq!(
        page.tasks.len(),
        skillgate_core::gateway::TASK_PAGE as usize
    );
    assert_eq!(page.tasks[0].status, TaskStatus::Working);
    assert!(page.tasks[0].message.contains("waits for a reviewer"));
    let cursor = page.next_cursor.expect("one more task than a page");
    let rest = f
        .gateway
        .tasks(&agent(), Some(&cursor))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rest.next_cursor, None);
    let listed: Vec<String> = page
        .tasks
        .iter()
        .chain(&rest.tasks)
        .map(|t| t.id.clone())
        .collect();
    assert_eq!(listed, made);
    // Another key sees none of them, and cannot page from one of them.
    let theirs = f.gateway.tasks(&other_key(), None).await.unwrap().unwrap();
    assert!(theirs.tasks.is_empty());
    assert!(
        f.gateway
            .tasks(&other_key(), Some(&cursor))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        f.gateway
            .tasks(&agent(), Some("task_nope"))
            .await
            .unwrap()
            .is_none()
    );
}
