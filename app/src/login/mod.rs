//! The sign-in page (it posts to the server's `/login`, not a server function), and the
//! way through the company's identity provider beside it.

mod options;
mod page;

pub use options::{Passwords, SignInOptions, get_sign_in_options};
pub use page::LoginPage;
