//! Who is signed in, for every page's header and the pages that show or hide actions.

use super::*;

/// The signed-in operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub username: String,
    pub role: Role,
}

impl Me {
    pub fn can_redrive(&self) -> bool {
        self.role.can_redrive()
    }

    pub fn is_admin(&self) -> bool {
        self.role.can_administer()
    }
}

/// Who is signed in.
#[server(prefix = "/dashboard/fn", endpoint = "me")]
pub async fn get_me() -> Result<Me, ServerFnError> {
    let (_, operator) = server::require(Role::Viewer).await?;
    Ok(Me {
        username: operator.username,
        role: operator.role,
    })
}
