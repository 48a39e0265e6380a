//! `nerve action …`: list actions, inspect their goals, send a goal and watch it.

use crate::failure::{usage, CmdResult, Failure};
use crate::json_arg::JsonArg;
use crate::output::{self, Format, FormatArg};
use crate::types::{from_json, message_json, Built};
use clap::Subcommand;
use nerve::action::{names, Action, ActionClient, ActionError, StatusList};
use nerve::message::{Message, Serde};
use nerve_msgs::action::{EchoAction, Fibonacci};
use nerve_msgs::ros2::{Ros2Action, Ros2ActionCdr};
use nerve_ros2_map::action::{ActionPass, Part};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Action commands.
#[derive(Subcommand)]
pub enum ActionCommand {
    /// List the actions served in the domain.
    List(FormatArg),
    /// Show an action's type, server and the goals it holds.
    Info {
        /// Action name, e.g. /fibonacci.
        name: String,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Send a goal, print its feedback as it comes and then its result. Ctrl-C cancels
    /// the goal.
    #[command(name = "send_goal", alias = "send-goal")]
    SendGoal {
        /// Action name, e.g. /fibonacci.
        name: String,
        /// Action type: built in (full or short name, e.g. Fibonacci), or a ROS 2 action
        /// type (`pkg/action/Name`, its `.action` file on AMENT_PREFIX_PATH), e.g.
        /// test_msgs/action/NestedMessage.
        action_type: String,
        /// Goal as JSON; fields left out keep their defaults, e.g. '{"order": 5}'.
        /// `@FILE` reads it from a file, `-` from standard input (Linux refuses one
        /// argument over 128 KiB).
        #[arg(value_parser = JsonArg::parse, value_name = "JSON|@FILE|-")]
        goal: JsonArg,
        /// Print feedback as it arrives.
        #[arg(long)]
        feedback: bool,
        /// How long to wait for a server and then for the result, in ms.
        #[arg(long, default_value_t = 30000)]
        timeout: u64,
        #[command(flatten)]
        format: FormatArg,
    },
}

/// What `send_goal` needs of a goal: where, what, and how to show it.
struct Request<'a> {
    node: &'a nerve::Node,
    name: &'a str,
    goal: &'a Value,
    feedback: bool,
    timeout: Duration,
    format: Format,
}

/// One action type the tool can send goals of.
struct ActionEntry {
    name: &'static str,
    send: fn(&Request<'_>) -> CmdResult,
}

fn registry() -> Vec<ActionEntry> {
    vec![
        ActionEntry {
            name: Fibonacci::TYPE_NAME,
            send: |r| send(r, &BuiltIn::<Fibonacci>(std::marker::PhantomData)),
        },
        ActionEntry {
            name: EchoAction::TYPE_NAME,
            send: |r| send(r, &BuiltIn::<EchoAction>(std::marker::PhantomData)),
        },
    ]
}

/// A goal: its head and elements.
type Parts<M> = (M, Vec<<M as Message>::Elem>);

/// How the tool builds goals of an action type from JSON and shows its feedback and
/// results as JSON.
trait Codec {
    /// The Nerve action type.
    type A: Action;
    /// The goal `v` describes.
    fn goal(&self, v: &Value) -> Result<Parts<<Self::A as Action>::Goal>, Failure>;
    /// Feedback as JSON.
    fn feedback(
        &self,
        head: &<Self::A as Action>::Feedback,
        elems: &[<<Self::A as Action>::Feedback as Message>::Elem],
    ) -> Result<Value, Failure>;
    /// A result as JSON.
    fn result(
        &self,
        head: &<Self::A as Action>::Result,
        elems: &[<<Self::A as Action>::Result as Message>::Elem],
    ) -> Result<Value, Failure>;
    /// Refuses a server that says it serves another type.
    fn check_server(&self, _node: &nerve::Node, _name: &str) -> CmdResult {
        Ok(())
    }
}

/// A built-in action type: its messages through their schemas.
struct BuiltIn<A>(std::marker::PhantomData<A>);

impl<A: Action> Codec for BuiltIn<A>
where
    A::Goal: Default,
{
    type A = A;
    fn goal(&self, v: &Value) -> Result<Parts<A::Goal>, Failure> {
        let Built { head, elems, zero } = from_json::<A::Goal>(v).map_err(usage)?;
        if !zero.is_empty() {
            eprintln!("note: goal fields not given are zero: {}", zero.join(", "));
        }
        Ok((head, elems))
    }
    fn feedback(
        &self,
        head: &A::Feedback,
        elems: &[<A::Feedback as Message>::Elem],
    ) -> Result<Value, Failure> {
        Ok(message_json::<A::Feedback>(head, elems))
    }
    fn result(
        &self,
        head: &A::Result,
        elems: &[<A::Result as Message>::Elem],
    ) -> Result<Value, Failure> {
        Ok(message_json::<A::Result>(head, elems))
    }
}

/// A ROS 2 action type carried as CDR: its messages through its definition.
struct Ros2(ActionPass);

impl Ros2 {
    /// ROS 2 action type `name` from the `.action` files on AMENT_PREFIX_PATH.
    fn load(name: &str) -> Result<Ros2, Failure> {
        let search = nerve_ros2_types::SearchPath::from_env();
        ActionPass::load(name, &search).map(Ros2).map_err(|e| {
            usage(format!(
                "unknown action type {name:?}: not built in ({}), and not a ROS 2 action \
                 type on AMENT_PREFIX_PATH: {e}",
                registry()
                    .iter()
                    .map(|e| e.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }

    fn json(&self, part: Part, head: &Ros2ActionCdr, cdr: &[u8]) -> Result<Value, Failure> {
        self.0
            .check(part, head, cdr)
            .and_then(|()| self.0.to_json(part, cdr))
            .map_err(|e| Failure::Runtime(anyhow::anyhow!("{}: {e}", self.0.name())))
    }
}

/// The ROS 2 action type (name, RIHS01 hash) a server of action `action` (resolved)
/// carried as CDR says it serves on its type topic, if it says one.
fn announced_type(node: &nerve::Node, action: &str) -> Option<(String, String)> {
    let topic = nerve_ros2_map::action::type_topic(action);
    let info = nerve::introspect::topic_info(node, &topic).ok()?;
    match &info.schema {
        Some(Ok(s)) => nerve_ros2_map::action::announced(s)
            .map(|(name, hash)| (name.to_string(), hash.to_string())),
        _ => None,
    }
}

/// The type an action's server serves, as tools show it: a ROS 2 type carried as CDR by
/// the name its server says (`pkg/action/Name`), any other by its Nerve name.
fn type_name(node: &nerve::Node, action: &str, nerve_type: &str) -> String {
    (nerve_type == nerve_ros2_map::action::CARRIER)
        .then(|| announced_type(node, action).map(|(t, _)| t))
        .flatten()
        .unwrap_or_else(|| nerve_type.to_string())
}

impl Codec for Ros2 {
    type A = Ros2Action;
    fn goal(&self, v: &Value) -> Result<Parts<Ros2ActionCdr>, Failure> {
        let cdr = self
            .0
            .from_json(Part::Goal, v)
            .map_err(|e| usage(e.to_string()))?;
        Ok((self.0.head(), cdr))
    }
    fn feedback(&self, head: &Ros2ActionCdr, elems: &[u8]) -> Result<Value, Failure> {
        self.json(Part::Feedback, head, elems)
    }
    fn result(&self, head: &Ros2ActionCdr, elems: &[u8]) -> Result<Value, Failure> {
        self.json(Part::Result, head, elems)
    }
    fn check_server(&self, node: &nerve::Node, name: &str) -> CmdResult {
        let Some((ty, hash)) = announced_type(node, &node.resolve_name(name)) else {
            return Ok(());
        };
        if ty != self.0.name() {
            return Err(usage(format!(
                "action {name} serves {ty}, not {}",
                self.0.name()
            )));
        }
        if hash != self.0.hash_text() {
            return Err(usage(format!(
                "action {name} serves another definition of {ty} ({hash}; AMENT_PREFIX_PATH \
                 has {})",
                self.0.hash_text()
            )));
        }
        Ok(())
    }
}

fn print(v: &Value, format: Format) -> std::io::Result<()> {
    match format {
        Format::Json => output::json(v),
        Format::Human => {
            println!("{}", crate::types::pretty(v));
            Ok(())
        }
    }
}

fn send<C: Codec>(req: &Request<'_>, codec: &C) -> CmdResult {
    let Request {
        node,
        name,
        goal,
        feedback,
        timeout,
        format,
    } = *req;
    let (head, elems) = codec.goal(goal)?;
    codec.check_server(node, name)?;
    let client = ActionClient::<C::A>::create(node, name).map_err(|e| match e {
        ActionError::Service(nerve::ServiceError::Name(_))
        | ActionError::Topic(nerve::TopicError::Name(_)) => usage(e.to_string()),
        e => Failure::Runtime(e.into()),
    })?;
    if !client.wait_for_server(timeout) {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "action {name}: no server within {timeout:?}"
        )));
    }
    let g = client.send_goal_with(elems.len(), |h, e| {
        *h = head;
        e.copy_from_slice(&elems);
    })?;
    eprintln!("goal {} accepted", g.id());
    let deadline = Instant::now() + timeout;
    let mut canceled = false;
    let print_feedback = |f: &nerve::action::Feedback<C::A>| -> CmdResult {
        let v = codec.feedback(f, f.elems())?;
        print(&json!({"feedback": v, "state": f.state().name()}), format)?;
        Ok(())
    };
    loop {
        if nerve::shutdown::requested() && !canceled {
            canceled = true;
            eprintln!("canceling goal {}: {}", g.id(), g.cancel()?);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::Runtime(anyhow::anyhow!(
                "action {name}: goal {} has no result after {timeout:?}",
                g.id()
            )));
        }
        let step = left.min(Duration::from_millis(100));
        if feedback {
            // None: the result is in, or nothing came within the step
            if let Some(f) = g.next_feedback(step)? {
                print_feedback(&f)?;
                continue;
            }
        }
        match g.result(if feedback { Duration::ZERO } else { step }) {
            Ok(r) => {
                while let Some(f) = g.try_feedback().filter(|_| feedback) {
                    print_feedback(&f)?;
                }
                let v = codec.result(&r, r.elems())?;
                print(
                    &json!({"goal": g.id().to_string(), "state": r.state().name(), "result": v}),
                    format,
                )?;
                return match r.state() {
                    nerve::action::GoalState::Succeeded => Ok(()),
                    s => Err(Failure::Runtime(anyhow::anyhow!("goal {} {s}", g.id()))),
                };
            }
            Err(ActionError::Timeout { .. }) => continue,
            Err(e) => return Err(Failure::Runtime(e.into())),
        }
    }
}

/// Runs an action command.
pub fn run(ctx: &nerve::Context, cmd: ActionCommand) -> CmdResult {
    let node = ctx
        .node(&format!("nerve_action_{}", std::process::id()))
        .create()?;
    match cmd {
        ActionCommand::List(f) => {
            let list = nerve::introspect::list_services(&node).map_err(anyhow::Error::msg)?;
            let rows: Vec<Vec<String>> = list
                .iter()
                .filter(|s| s.servers > 0)
                .filter_map(|s| {
                    let a = names::action_of_goal_service(&s.name)?;
                    let ty = type_name(&node, a, &s.type_name);
                    Some(vec![a.to_string(), ty, s.clients.to_string()])
                })
                .collect();
            match f.format {
                Format::Json => output::json(&json!(rows
                    .iter()
                    .map(|r| json!({"name": r[0], "type": r[1], "clients": r[2].parse::<u64>().unwrap_or(0)}))
                    .collect::<Vec<_>>()))?,
                Format::Human => output::table(&["NAME", "TYPE", "CLIENTS"], &rows)?,
            }
            Ok(())
        }
        ActionCommand::Info { name, format } => {
            let goal_service = names::goal(&name);
            let info = nerve::introspect::list_services(&node)
                .map_err(anyhow::Error::msg)?
                .into_iter()
                .find(|s| s.name == goal_service && s.servers > 0)
                .ok_or_else(|| anyhow::anyhow!("action {name}: no server"))?;
            let type_name = type_name(&node, &node.resolve_name(&name), &info.type_name);
            let status = node
                .subscriber::<Serde<StatusList>>(&names::status(&name))
                .qos(nerve::action::status_qos())
                .create()?;
            let list = status
                .recv_timeout(Duration::from_secs(1))?
                .map(|s| s.decode())
                .transpose()?;
            let goals: Vec<Value> = list
                .map(|l| l.goals)
                .unwrap_or_default()
                .iter()
                .map(|g| {
                    json!({"goal": nerve::action::GoalId { client: g.goal.0, seq: g.goal.1 }.to_string(),
                        "state": g.state.name()})
                })
                .collect();
            let v = json!({
                "name": name, "type": type_name, "goal": info.request.name,
                "result": info.response.name, "clients": info.clients, "goals": goals,
            });
            match format.format {
                Format::Json => output::json(&v)?,
                Format::Human => {
                    println!("action:  {name}");
                    println!("type:    {type_name}");
                    println!("clients: {}", info.clients);
                    let rows: Vec<Vec<String>> = goals
                        .iter()
                        .map(|g| {
                            vec![
                                g["goal"].as_str().unwrap_or("").to_string(),
                                g["state"].as_str().unwrap_or("").to_string(),
                            ]
                        })
                        .collect();
                    output::table(&["GOAL", "STATE"], &rows)?;
                }
            }
            Ok(())
        }
        ActionCommand::SendGoal {
            name,
            action_type,
            goal,
            feedback,
            timeout,
            format,
        } => {
            let value = goal.value("the goal")?;
            let req = Request {
                node: &node,
                name: &name,
                goal: &value,
                feedback,
                timeout: Duration::from_millis(timeout),
                format: format.format,
            };
            // a ROS 2 type with a Nerve form is that form (test_msgs/action/Fibonacci)
            let native = nerve_ros2_map::action::native_action(&action_type);
            let wanted = native.unwrap_or(&action_type);
            match registry()
                .into_iter()
                .find(|e| e.name == wanted || e.name.rsplit('/').next() == Some(wanted))
            {
                Some(entry) => (entry.send)(&req),
                None => send(&req, &Ros2::load(&action_type)?),
            }
        }
    }
}
